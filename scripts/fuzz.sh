#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer, clang 14, ASan + UBSan) of every parser that reads hostile
# bytes: the KServe JSON codec and binary tensors, the HTTP routes with the OpenAI/rerank/TEI
# parsers, the YAML configuration, durations/integers/UTF-8/JSON depth, the GGUF header check,
# the ONNX graph reader, OpenCV's ONNX importer (in its probe child, as the server runs it), the
# image decoding and pre-processing, JSON schemas into grammars (llama.cpp's converter and grammar
# parser), and chat requests and answers through llama.cpp's chat library (a real template).
#
#   scripts/fuzz.sh [SECONDS_EACH] [FUZZER...]    default: 20 s each, every harness
#   scripts/fuzz.sh --configure                   only configure build-fuzz/ (scripts/test.sh)
#
# Builds tests/fuzz/ into build-fuzz/ (clang; the Debian packages clang-14 and libclang-rt-14-dev
# are installed when missing). The same tree builds the unit tests under ASan + UBSan and checks
# the lock annotations (-Werror=thread-safety) for scripts/test.sh. Replays the committed corpus
# (tests/fuzz/corpus/<name>/: seeds and every crash ever found), then fuzzes each harness for
# SECONDS_EACH (one per core at a time) with what it learnt kept in build-fuzz/corpus/<name>/.
# A crash leaves its input in build-fuzz/artifacts/ and fails the run; copy it into the
# committed corpus once fixed. Prints one line per harness and a summary.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
CONFIGURE_ONLY=false
[[ "${1:-}" == "--configure" ]] && CONFIGURE_ONLY=true && shift
SECONDS_EACH="${1:-20}"
shift || true
ALL=(json_codec_fuzzer http_router_fuzzer config_fuzzer scalars_fuzzer gguf_fuzzer onnx_graph_fuzzer
     onnx_import_fuzzer image_fuzzer cgroup_fuzzer worker_wire_fuzzer schema_grammar_fuzzer chat_fuzzer)
[[ $# -gt 0 ]] && FUZZERS=("$@") || FUZZERS=("${ALL[@]}")

if ! command -v clang++-14 >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "ok installed"; then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev
fi
if [[ ! -f build-fuzz/build.ninja ]] || $CONFIGURE_ONLY; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DMMSERVE_FUZZ=ON \
    -DMMSERVE_SANITIZE="address,undefined" -DMMSERVE_THREAD_SAFETY=ON >/dev/null
fi
$CONFIGURE_ONLY && exit 0
cmake --build build-fuzz -j "${MMSERVE_JOBS:-$(nproc)}" --target fuzzers | grep -E 'FAILED|error:' || true
cmake --build build-fuzz -j "${MMSERVE_JOBS:-$(nproc)}" --target fuzzers >/dev/null

# fuzz_one NAME: one harness for SECONDS_EACH; its exit code goes to build-fuzz/NAME.rc.
fuzz_one() {
  local f=$1 rc=0
  mkdir -p "build-fuzz/corpus/$f"
  # -timeout: one input may take at most 10 s; -rss_limit_mb: memory is bounded per input too.
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build-fuzz/tests/fuzz/$f" "build-fuzz/corpus/$f" "tests/fuzz/corpus/$f" \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$f-" >"build-fuzz/$f.log" 2>&1 || rc=$?
  echo "$rc" >"build-fuzz/$f.rc"
}

# One harness per core at a time: each still has a core for its SECONDS_EACH.
mkdir -p build-fuzz/artifacts
rm -f build-fuzz/*.rc
running=0
for f in "${FUZZERS[@]}"; do
  if ((running >= ${MMSERVE_JOBS:-$(nproc)})); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$f" &
  running=$((running + 1))
done
wait

passed=0
failed=0
total_runs=0
for f in "${FUZZERS[@]}"; do
  log="build-fuzz/$f.log"
  if [[ "$(cat "build-fuzz/$f.rc" 2>/dev/null)" == 0 ]]; then
    runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)
    cov=$(grep -aoE 'cov: [0-9]+' "$log" | tail -1 || true)
    echo "fuzz $f: ok, ${runs:-0} inputs in ${SECONDS_EACH} s, ${cov:-cov: ?}, corpus $(ls "build-fuzz/corpus/$f" | wc -l)"
    total_runs=$((total_runs + ${runs:-0}))
    passed=$((passed + 1))
  else
    echo "fuzz $f: FAILED (input in build-fuzz/artifacts/, log $log)"
    grep -aE 'ERROR|SUMMARY|==[0-9]+==|runtime error' "$log" | head -20 || true
    failed=$((failed + 1))
  fi
done
echo "fuzz: $total_runs inputs in total"
echo "fuzz: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
