#!/usr/bin/env bash
# The test command: sets up what is missing (scripts/setup.sh), then runs every test:
#   1. build/       (RelWithDebInfo)   unit + integration tests, the real binary on 127.0.0.1
#   2. build-asan/  (ASan + UBSan)     unit tests, mmserve's own code instrumented
#   3. build-tsan/  (ThreadSanitizer)  the concurrency tests (label tsan)
#   4. build-clang/ (clang 14)          unit tests, -Werror=thread-safety (the lock annotations)
#   5. build-fuzz/  (clang, libFuzzer)  every fuzz harness for a bounded time (scripts/fuzz.sh)
#   6. bench/all.sh --quick             every benchmark scenario as a smoke test (answers checked)
# Ends with one line "tests: N passed, M failed" and exits non-zero if anything failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${MMSERVE_JOBS:-$(nproc)}"
# ccache hits across clones in different folders (CI clones afresh): hash relative paths only.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
cd "$ROOT"

step() { printf '\n==> %s\n' "$*"; }

bash scripts/setup.sh --with-reference-tools
# From npm, pinned (npm checks their integrity), into .deps/node: the official OpenAI client the
# API tests drive mmserve with, and playwright-core, which drives chromium for the status page.
NPM_PACKAGES=(openai@5.23.2 playwright-core@1.59.1)
for pkg in "${NPM_PACKAGES[@]}"; do
  if [[ "$(node -p "require('./.deps/node/node_modules/${pkg%@*}/package.json').version" 2>/dev/null)" != "${pkg##*@}" ]]; then
    step "npm: installing ${NPM_PACKAGES[*]} into .deps/node"
    npm install --silent --no-audit --no-fund --prefix "$ROOT/.deps/node" "${NPM_PACKAGES[@]}" >/dev/null
    break
  fi
done
step "architecture: layer order, runtime ownership, file and function sizes"
bash scripts/check_layers.sh
python3 scripts/check_sizes.py

passed=0
failed=0
# run_ctest DIR LABEL [WRAPPER...]: runs ctest (under WRAPPER), adds its counts to the totals,
# never exits early.
run_ctest() {
  local dir=$1 label=$2 log
  shift 2
  log=$(mktemp)
  set +e
  "$@" ctest --test-dir "$dir" -L "$label" -j "$JOBS" --output-on-failure --timeout 300 2>&1 | tee "$log" |
    grep -vE '^ +Start |Test +#[0-9]+: .* Passed'
  set -e
  local line
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
  if [[ -z "$line" ]]; then
    echo "error: ctest in $dir produced no summary" >&2
    failed=$((failed + 1))
  else
    local bad total
    bad=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
    passed=$((passed + total - bad))
    failed=$((failed + bad))
  fi
  rm -f "$log"
}

# configure_sanitized DIR SANITIZERS: a second build of mmserve's own code (llama.cpp is reused).
configure_sanitized() {
  cmake -S "$ROOT" -B "$ROOT/$1" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DMMSERVE_SANITIZE="$2" >/dev/null
}

step "tests: unit + integration (build/)"
run_ctest build "unit|integration"

step "tests: unit under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
configure_sanitized build-asan "address,undefined"
cmake --build build-asan -j "$JOBS" | grep -E 'FAILED|error' || true
cmake --build build-asan -j "$JOBS" >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-asan unit

step "tests: concurrency under ThreadSanitizer (build-tsan/)"
configure_sanitized build-tsan "thread"
tsan_targets=$(sed -nE 's/.*mms_add_test\(([a-z_]+) .* TSAN\).*/\1/p' $(find tests -name CMakeLists.txt))
cmake --build build-tsan -j "$JOBS" --target $tsan_targets | grep -E 'FAILED|error' || true
cmake --build build-tsan -j "$JOBS" --target $tsan_targets >/dev/null
# ASLR-heavy kernels break TSan's shadow-memory layout: run without ASLR where setarch can.
wrapper=()
if setarch "$(uname -m)" -R true 2>/dev/null; then wrapper=(setarch "$(uname -m)" -R); fi
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run_ctest build-tsan tsan "${wrapper[@]}"

step "tests: unit tests built by clang 14 with -Werror=thread-safety (build-clang/)"
# The lock annotations (common/mutex.h, GUARDED_BY/REQUIRES) are checked by clang only. The
# llama backend's tests are left to build/: clang links LLVM's OpenMP runtime next to the GNU
# one llama.cpp was built with, and those tests count the compute threads it keeps.
CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$ROOT/build-clang" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-g -O0" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DMMSERVE_THREAD_SAFETY=ON >/dev/null
unit_targets=$(find tests -name '*_test.cc' -not -path 'tests/integration/*' -not -path 'tests/fuzz/*' \
  -not -name llama_backend_test.cc -exec basename {} .cc \;)
cmake --build build-clang -j "$JOBS" --target $unit_targets | grep -E 'FAILED|error:' || true
cmake --build build-clang -j "$JOBS" --target $unit_targets >/dev/null
run_ctest build-clang unit

step "fuzzing: every harness for ${MMSERVE_FUZZ_SECONDS:-20} s (scripts/fuzz.sh; the committed corpus replayed first)"
set +e
bash scripts/fuzz.sh "${MMSERVE_FUZZ_SECONDS:-20}" 2>&1 | tee build/fuzz.log | grep -E '^fuzz|ERROR|SUMMARY|runtime error|FAILED|error:'
set -e
fuzz_line=$(grep -E '^fuzz: [0-9]+ passed, [0-9]+ failed' build/fuzz.log | tail -1 || true)
if [[ -z "$fuzz_line" ]]; then
  echo "error: scripts/fuzz.sh produced no summary" >&2
  failed=$((failed + 1))
else
  passed=$((passed + $(sed -E 's/fuzz: ([0-9]+) passed.*/\1/' <<<"$fuzz_line")))
  failed=$((failed + $(sed -E 's/.* ([0-9]+) failed/\1/' <<<"$fuzz_line")))
fi

step "benchmarks: bench/all.sh --quick (every scenario side by side, tiny models; checks answers, asserts no goal)"
if bash bench/all.sh --quick >build/bench-quick.log 2>&1; then
  passed=$((passed + 1))
  tail -1 build/bench-quick.log
else
  failed=$((failed + 1))
  tail -40 build/bench-quick.log
fi

echo
echo "tests: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
