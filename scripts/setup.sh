#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine:
#   1. installs the Debian packages mmserve builds against (apt-get update only when something is missing);
#   2. fetches llama.cpp from the npm package node-llama-cpp@3.21.1 (sha512-verified git bundle);
#   3. builds llama.cpp's static CPU libraries once into .deps/llama (ccache-cached across clones);
#   4. configures and builds mmserve (release) into build/.
# Every step is skipped when its result is already there. Progress goes to stdout.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
JOBS="${MMSERVE_JOBS:-$(nproc)}"
# ccache hits across clones in different folders (CI clones afresh): hash relative paths only.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
LLAMA_NPM_VERSION="3.21.1"
LLAMA_NPM_INTEGRITY="sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=="

# step TEXT: starts a step and says how long the one before it took.
step_name=""
step_start=$SECONDS
step() {
  [[ -n "$step_name" ]] && printf '    (%d s: %s)\n' $((SECONDS - step_start)) "$step_name"
  step_name="$1"
  step_start=$SECONDS
  printf '\n==> %s\n' "$*"
}

APT_PACKAGES=(
  build-essential cmake ninja-build ccache git curl pkg-config
  libboost-dev libboost-system-dev libyaml-cpp-dev nlohmann-json3-dev libsimdjson-dev libspdlog-dev libfmt-dev
  libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev python3-numpy
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libopencv-dev libjpeg62-turbo-dev
  libseccomp-dev python3-onnx
  openssl
)
# Only the tests need these: the Python gRPC client, promtool (checks /metrics), and clang with
# its runtime libraries for the libFuzzer harnesses (scripts/fuzz.sh), and OpenCV's
# Python module and its sample photos (the references and inputs of the vision tests), and
# what the deployment test renders and reads manifests with (kubectl kustomize, PyYAML), and the
# browser the status page is tested in (driven by playwright-core from npm, scripts/test.sh).
TEST_PACKAGES=(python3-grpcio python3-protobuf prometheus clang-14 libclang-rt-14-dev python3-opencv opencv-doc
  python3-yaml python3-jsonschema chromium)

install_packages() {
  local missing=() wanted=("${APT_PACKAGES[@]}")
  [[ "${1:-}" == "--with-reference-tools" ]] && wanted+=("${TEST_PACKAGES[@]}")
  # npm fetches llama.cpp; a kubectl of any origin renders the manifests: Debian's only if none.
  command -v npm >/dev/null || wanted+=(npm)
  [[ "${1:-}" == "--with-reference-tools" ]] && ! command -v kubectl >/dev/null &&
    wanted+=(kubernetes-client)
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    step "Debian packages: all present"
    return
  fi
  step "Debian packages: installing ${missing[*]}"
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

fetch_llama() {
  if [[ -f "$DEPS/llama.cpp/include/llama.h" ]]; then
    step "llama.cpp source: present ($(cat "$DEPS/llama.cpp/.mmserve-tag" 2>/dev/null || echo unknown))"
    return
  fi
  step "llama.cpp source: fetching node-llama-cpp@$LLAMA_NPM_VERSION from npm"
  mkdir -p "$DEPS/npm"
  local tgz="$DEPS/npm/node-llama-cpp-$LLAMA_NPM_VERSION.tgz"
  if [[ ! -f "$tgz" ]]; then
    (cd "$DEPS/npm" && npm pack --silent "node-llama-cpp@$LLAMA_NPM_VERSION" >/dev/null)
  fi
  local actual="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [[ "$actual" != "$LLAMA_NPM_INTEGRITY" ]]; then
    echo "error: $tgz integrity mismatch: expected $LLAMA_NPM_INTEGRITY, found $actual" >&2
    rm -f "$tgz"
    exit 1
  fi
  echo "    integrity verified: $actual"
  rm -rf "$DEPS/npm/package" "$DEPS/llama.cpp"
  tar -xzf "$tgz" -C "$DEPS/npm" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
  git -c advice.detachedHead=false clone --quiet "$DEPS/npm/package/llama/gitRelease.bundle" "$DEPS/llama.cpp"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tag"])' \
    "$DEPS/npm/package/llama/llama.cpp.info.json" >"$DEPS/llama.cpp/.mmserve-tag"
  echo "    llama.cpp $(cat "$DEPS/llama.cpp/.mmserve-tag") cloned into .deps/llama.cpp"
}

# Configuring mmserve builds llama.cpp's static libraries once per variant (cmake/llama.cmake),
# with MMSERVE_CUDA / MMSERVE_CANN forwarded to GGML_CUDA / GGML_CANN.
build_mmserve() {
  step "mmserve: configuring build/ (builds llama.cpp's libraries first if .deps has none)"
  # -g1 (line tables): what perf and stack traces need, at two thirds of -g's compile time.
  cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DMMSERVE_CUDA="${MMSERVE_CUDA:-OFF}" -DMMSERVE_CANN="${MMSERVE_CANN:-OFF}" |
    awk '/Building llama|Error|error/ || NR % 20 == 0'
  step "mmserve: building build/"
  cmake --build "$ROOT/build" -j "$JOBS"
}

# Deterministic random-weight GGUF models with real tokenizers (tools/gen_models.py): the tiny
# ones for the tests and the demo; MMSERVE_MODEL_SIZES=tiny,base adds the benchmark sizes.
generate_models() {
  step "models: generating ${MMSERVE_MODEL_SIZES:-tiny} GGUF and the ONNX vision models into models/generated (skips existing)"
  PYTHONPATH="$DEPS/llama.cpp/gguf-py" /usr/bin/python3 "$ROOT/tools/gen_models.py" \
    --out "$ROOT/models/generated" --sizes "${MMSERVE_MODEL_SIZES:-tiny}" \
    --vocab-dir "$DEPS/llama.cpp/models"
  /usr/bin/python3 "$ROOT/tools/gen_vision_models.py" --out "$ROOT/models/generated"
}

# llama.cpp's own programs, built from the same bundle, that the tests and benchmarks compare
# mmserve against: llama-embedding, llama-simple (greedy generation), llama-server. They are
# built in the tree that built mmserve's llama.cpp libraries (cmake/llama.cmake), so ggml and
# llama are compiled once and both sides of every comparison run the same kernels.
build_reference_tools() {
  local tree="$DEPS/llama-cpu-build"
  step "llama.cpp reference tools: llama-embedding, llama-simple, llama-server ($tree)"
  # The library flags are cmake/llama.cmake's (keep them alike, or ggml is compiled again); the
  # tree exists already unless mmserve was built for another variant (MMSERVE_CUDA, MMSERVE_CANN).
  cmake -S "$DEPS/llama.cpp" -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$DEPS/llama-cpu" \
    -DCMAKE_C_COMPILER_LAUNCHER="$(command -v ccache)" -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache)" \
    -DCMAKE_C_FLAGS=-w -DCMAKE_CXX_FLAGS=-w -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_CUDA=OFF -DGGML_CANN=OFF \
    -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_COMMON=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF >/dev/null
  cmake --build "$tree" -j "$JOBS" --target llama-embedding llama-simple llama-server |
    awk 'NR % 25 == 0 || /FAILED|error:/' || true
  cmake --build "$tree" -j "$JOBS" --target llama-embedding llama-simple llama-server >/dev/null
}

install_packages "${1:-}"
fetch_llama
generate_models
build_mmserve
[[ "${1:-}" == "--with-reference-tools" ]] && build_reference_tools
step "set-up done"
