#!/usr/bin/env bash
# Architecture checks that the compiler cannot make (run by scripts/test.sh):
#   1. includes point down the layer order only (docs/ARCHITECTURE.md); inside a layer, sibling
#      folders stay apart (backend/acl never includes backend/llama, server/http never
#      server/grpc), and the shared files of backend/ and server/ sit below their folders
#      (server/prometheus.h never includes server/http/...);
#   2. only runtime/ initializes or finalizes a device runtime (RuntimeGuard is its single owner);
#   3. engine headers stay in their backend's folder or runtime/;
#   4. hostile input is read without recursion or exceptions: no std::regex or std::sto* in src/,
#      and nlohmann JSON is parsed and dumped only through common/json.h (depth limit, no throw
#      on invalid UTF-8; docs/RELIABILITY.md).
#
# Usage: check_layers.sh [SRC_DIR]   (default: the repository's src/)
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../src}"
layers=(common config runtime backend scheduler service server app)
declare -A rank_of
for i in "${!layers[@]}"; do rank_of[${layers[$i]}]=$i; done
# Layers whose own files sit below their folders.
shared_below=(backend server)
# The folder inside its layer that a path lies in ("" for a file directly in the layer).
subfolder() {
  local rest=${1#*/}
  REPLY=""
  [[ $rest == */* ]] && REPLY=${rest%%/*}
  return 0
}
fail=0
for file in $(find . -name '*.h' -o -name '*.cc' | sed 's|^\./||'); do
  layer=${file%%/*}
  own=${rank_of[$layer]:--1}
  subfolder "$file"
  sub=$REPLY
  while IFS= read -r inc; do
    target=${rank_of[${inc%%/*}]:--1}
    if ((target > own)); then
      echo "layer violation: src/$file includes \"$inc\" (${inc%%/*} is above $layer)"
      fail=1
    fi
    [[ ${inc%%/*} == "$layer" ]] || continue
    subfolder "$inc"
    isub=$REPLY
    [[ -n $isub && $isub != "$sub" ]] || continue
    if [[ -n $sub ]]; then
      echo "layer violation: src/$file includes \"$inc\" ($layer/$sub and $layer/$isub are siblings)"
      fail=1
    elif [[ " ${shared_below[*]} " == *" $layer "* ]]; then
      echo "layer violation: src/$file includes \"$inc\" ($layer/'s own files are below $layer/$isub/)"
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
# Every virtual of Session and Instance has a forwarding override in backend/forwarding.h, so
# that a decorator deriving from the Forwarding bases cannot drop a capability added later.
for class in Session Instance; do
  for method in $(awk -v c="$class" '$0 ~ "^class " c " \\{" {on=1; next} on && /^};/ {on=0}
                     on && /virtual/ {sub(/\(.*/, ""); print $NF}' backend/backend.h | grep -v '^~'); do
    if ! awk -v c="Forwarding$class" '$0 ~ "^class " c " " {on=1; next} on && /^};/ {on=0}
                                      on {print}' backend/forwarding.h |
         grep -qE "[ *&>]$method\(.*(override|$)"; then
      echo "backend/forwarding.h: Forwarding$class does not forward $class::$method (a decorator"
      echo "would drop it): forward it there"
      fail=1
    fi
  done
done
((fail == 0)) && echo "layers: ok"
exit "$fail"
