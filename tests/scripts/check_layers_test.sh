#!/usr/bin/env bash
# scripts/check_layers.sh passes on src/ and catches each kind of violation planted in a copy.
set -euo pipefail
root=$1
check="$root/scripts/check_layers.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bash "$check" "$root/src" >/dev/null || { echo "FAIL: src/ itself does not pass"; exit 1; }

failures=0
# plant FILE LINE EXPECTED: a fresh copy of src/ with LINE appended to FILE must fail with
# EXPECTED in the output.
plant() {
  rm -rf "$tmp/src" && cp -r "$root/src" "$tmp/src"
  echo "$2" >>"$tmp/src/$1"
  if out=$(bash "$check" "$tmp/src" 2>&1); then
    echo "FAIL: planted '$2' in $1, check_layers.sh passed"
    failures=$((failures + 1))
  elif [[ $out != *"$3"* ]]; then
    echo "FAIL: planted '$2' in $1: expected '$3' in: $out"
    failures=$((failures + 1))
  else
    echo "ok: $1: $3"
  fi
}
plant service/lifecycle.cc '#include "server/prometheus.h"' "server is above service"
plant server/prometheus.cc '#include "server/http/http_response.h"' "server/'s own files are below server/http/"
plant server/http/http_router.cc '#include "server/grpc/grpc_frontend.h"' "server/http and server/grpc are siblings"
plant backend/acl/acl_backend.cc '#include "backend/llama/gguf_summary.h"' "backend/acl and backend/llama are siblings"
plant backend/backend_registry.cc '#include "backend/identity/identity_backend.h"' "backend/'s own files are below"
plant service/model_registry.cc 'int x = std::stoi("1");' "std::regex, std::sto*"
plant backend/llama/llama_backend.cc 'void f() { aclInit(nullptr); }' "runtime init/finalize outside src/runtime/"

# The size limits (scripts/check_sizes.py): a file past 600 lines, a function past 80.
sizes="$root/scripts/check_sizes.py"
python3 "$sizes" "$root/src" >/dev/null || { echo "FAIL: src/ is over the size limits"; exit 1; }
plant_sizes() {
  rm -rf "$tmp/src" && cp -r "$root/src" "$tmp/src"
  python3 -c "$2" >>"$tmp/src/$1"
  if out=$(python3 "$sizes" "$tmp/src" 2>&1); then
    echo "FAIL: planted $3 in $1, check_sizes.py passed"
    failures=$((failures + 1))
  elif [[ $out != *"$3"* ]]; then
    echo "FAIL: planted in $1: expected '$3' in: $out"
    failures=$((failures + 1))
  else
    echo "ok: $1: $3"
  fi
}
plant_sizes common/pages.cc 'print("\n" * 600)' "lines (at most 600)"
plant_sizes common/pages.cc 'print("int Planted(int x) {\n" + "  x += 1;\n" * 90 + "  return x;\n}")' \
  "a function of 93 lines"
# A capability added to Session without a forwarding override in backend/forwarding.h.
rm -rf "$tmp/src" && cp -r "$root/src" "$tmp/src"
sed -i 's/^class Session {$/class Session {\n public:\n  virtual bool planted_capability() const { return false; }/' "$tmp/src/backend/backend.h"
if out=$(bash "$check" "$tmp/src" 2>&1); then
  echo "FAIL: a new Session virtual without forwarding, check_layers.sh passed"
  failures=$((failures + 1))
elif [[ $out != *"does not forward Session::planted_capability"* ]]; then
  echo "FAIL: a new Session virtual: expected the forwarding error in: $out"
  failures=$((failures + 1))
else
  echo "ok: backend/backend.h: a new Session virtual needs a forwarding decision"
fi
((failures == 0)) && echo "check_layers: every planted violation caught"
exit "$failures"
