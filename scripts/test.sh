#!/usr/bin/env bash
# The test command: sets up what is missing (scripts/setup.sh), then runs every test:
#   1. build/       (GCC, RelWithDebInfo)  unit + integration tests, the real binary on 127.0.0.1
#   2. build-fuzz/  (clang 14, ASan + UBSan, libFuzzer coverage, -Werror=thread-safety)
#                   the unit tests, mmserve's own code instrumented; the lock annotations are
#                   checked as this tree compiles (no separate build for them)
#   3. build-tsan/  (GCC, ThreadSanitizer)  the concurrency tests (label tsan)
#   4. build-fuzz/  every fuzz harness for a bounded time (scripts/fuzz.sh)
#   5. bench/all.sh --quick                 every benchmark scenario as a smoke test (answers checked)
# Three build trees, each with ccache (keyed on paths relative to the clone, so a fresh clone
# hits what another clone compiled). Prints each phase's minutes at the end, then one line
# "tests: N passed, M failed", and exits non-zero if anything failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${MMSERVE_JOBS:-$(nproc)}"
# ccache hits across clones in different folders (CI clones afresh): hash relative paths only.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
cd "$ROOT"

# step TEXT: starts a phase; the one before it is timed (phase_end).
phases=()
phase_name=""
phase_start=$SECONDS
phase_end() {
  [[ -n "$phase_name" ]] &&
    phases+=("$(awk -v s=$((SECONDS - phase_start)) -v n="$phase_name" 'BEGIN { printf "%5.1f min  %s", s / 60, n }')")
  phase_name=""
}
step() {
  phase_end
  phase_name="$1"
  phase_start=$SECONDS
  printf '\n==> %s\n' "$*"
}

step "set-up: Debian packages, llama.cpp, models, build/, reference tools (scripts/setup.sh)"
ccache -z >/dev/null 2>&1 || true  # the hits printed at the end are this run's

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

# build TREE [TARGET...]: builds, printing only the failing lines; the second, silent run is a
# no-op after success and stops the script (set -e) after a failure.
build() {
  local tree=$1
  shift
  local targets=()
  (($# > 0)) && targets=(--target "$@")
  cmake --build "$tree" -j "$JOBS" "${targets[@]}" | grep -E 'FAILED|error:' || true
  cmake --build "$tree" -j "$JOBS" "${targets[@]}" >/dev/null
}

step "tests: unit + integration (build/)"
run_ctest build "unit|integration"

step "build-fuzz/: clang 14, ASan + UBSan, libFuzzer coverage, lock annotations checked"
# One clang tree for the sanitized unit tests, the thread-safety analysis (-Werror=thread-safety
# as it compiles) and the fuzz harnesses that the fuzzing phase runs.
bash scripts/fuzz.sh --configure
build build-fuzz

step "tests: unit under ASan + UBSan (build-fuzz/)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  run_ctest build-fuzz unit

step "build-tsan/: GCC, ThreadSanitizer, the concurrency tests"
cmake -S "$ROOT" -B "$ROOT/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DMMSERVE_SANITIZE=thread >/dev/null
tsan_targets=$(sed -nE 's/.*mms_add_test\(([a-z_]+) .* TSAN\).*/\1/p' $(find tests -name CMakeLists.txt))
build build-tsan $tsan_targets

step "tests: concurrency under ThreadSanitizer (build-tsan/)"
# ASLR-heavy kernels break TSan's shadow-memory layout: run without ASLR where setarch can.
wrapper=()
if setarch "$(uname -m)" -R true 2>/dev/null; then wrapper=(setarch "$(uname -m)" -R); fi
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run_ctest build-tsan tsan "${wrapper[@]}"

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

phase_end
echo
echo "phases (minutes, this machine; ccache: $(ccache -s 2>/dev/null | sed -nE 's/^ *Hits: *([0-9]+ \/ *[0-9]+.*)/\1/p' | head -1)):"
printf '  %s\n' "${phases[@]}"
echo
echo "tests: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
