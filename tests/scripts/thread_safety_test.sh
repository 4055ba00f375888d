#!/usr/bin/env bash
# The lock annotations are checked where scripts/test.sh compiles src/ with clang (build-fuzz/):
# with those flags, touching a GUARDED_BY member without its Mutex fails the compile, and the
# same member touched under a MutexLock compiles.
#   thread_safety_test.sh ROOT CLANG FLAGS...
set -euo pipefail
root=$1 clang=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

compile() {  # compile BODY FLAGS...: BODY is a member function's, beside `int n_ GUARDED_BY(mu_)`
  local body=$1
  shift
  cat >"$tmp/t.cc" <<CC
#include "common/mutex.h"
namespace mmserve {
class Counter {
 public:
  void Touch() { $body }
 private:
  Mutex mu_;
  int n_ GUARDED_BY(mu_) = 0;
};
}  // namespace mmserve
CC
  "$clang" -std=c++20 -fsyntax-only -I"$root/src" "$@" "$tmp/t.cc" 2>&1
}

failures=0
if ! out=$(compile 'MutexLock lock(mu_); ++n_;' "$@"); then
  echo "FAIL: a member touched under its lock does not compile: $out"
  failures=$((failures + 1))
fi
if out=$(compile '++n_;' "$@"); then
  echo "FAIL: a GUARDED_BY member touched without its lock compiled"
  failures=$((failures + 1))
elif [[ $out != *"requires holding mutex 'mu_'"* ]]; then
  echo "FAIL: expected \"requires holding mutex 'mu_'\" in: $out"
  failures=$((failures + 1))
fi
[[ $failures -eq 0 ]] && echo "ok: the lock annotations are checked"
exit $failures
