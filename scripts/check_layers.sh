#!/usr/bin/env bash
# Architecture checks that the compiler cannot make (run by scripts/test.sh):
#   1. includes point down the layer order only (docs/ARCHITECTURE.md);
#   2. only runtime/ initializes or finalizes a device runtime (RuntimeGuard is its single owner);
#   3. engine headers stay in their backend's folder or runtime/;
#   4. hostile input is read without recursion or exceptions: no std::regex or std::sto* in src/,
#      and nlohmann JSON is parsed and dumped only through common/json.h (depth limit, no throw
#      on invalid UTF-8; docs/RELIABILITY.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../src"
layers=(common config runtime backend scheduler service server app)
rank() { for i in "${!layers[@]}"; do [[ ${layers[$i]} == "$1" ]] && echo "$i" && return; done; echo -1; }
fail=0
for file in $(find . -name '*.h' -o -name '*.cc' | sed 's|^\./||'); do
  own=$(rank "${file%%/*}")
  while IFS= read -r inc; do
    target=$(rank "${inc%%/*}")
    if ((target > own)); then
      echo "layer violation: src/$file includes \"$inc\" (${inc%%/*} is above ${file%%/*})"
      fail=1
    fi
  done < <(sed -nE 's/^#include "([^"]+)".*/\1/p' "$file")
done
if grep -rnE '\b(aclInit|aclFinalize|llama_backend_init|llama_backend_free|cuInit)\s*\(' . |
   grep -vE '^\./runtime/'; then
  echo "runtime init/finalize outside src/runtime/: only RuntimeGuard's runtimes may call these"
  fail=1
fi
if grep -rnE '#include [<"](llama|ggml|acl/acl|cuda_runtime|runtime/acl/)[a-z_-]*(\.h)?' . |
   grep -vE '^\./(runtime|backend/(llama|acl))/'; then
  echo "engine header outside its backend folder"
  fail=1
fi
# Code, not comments: lines whose first non-blank characters are not "//".
if grep -rnE '^[^/]*(std::regex|std::sto(i|l|ll|ul|ull|f|d|ld)\(|\.dump\(|json::parse\()' . |
   grep -vE '^\./common/json\.(h|cc):'; then
  echo "std::regex, std::sto*, json::parse or .dump( outside common/json: use ParseJson, DumpJson,"
  echo "ParseInt64 or a hand-written scanner (they recurse or throw on hostile input)"
  fail=1
fi
((fail == 0)) && echo "layers: ok"
exit "$fail"
