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
LLAMA_NPM_VERSION="3.21.1"
LLAMA_NPM_INTEGRITY="sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=="

step() { printf '\n==> %s\n' "$*"; }

APT_PACKAGES=(
  build-essential cmake ninja-build ccache git curl pkg-config
  libboost-dev libboost-system-dev libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev python3-numpy
)

install_packages() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
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
  git clone --quiet "$DEPS/npm/package/llama/gitRelease.bundle" "$DEPS/llama.cpp"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tag"])' \
    "$DEPS/npm/package/llama/llama.cpp.info.json" >"$DEPS/llama.cpp/.mmserve-tag"
  echo "    llama.cpp $(cat "$DEPS/llama.cpp/.mmserve-tag") cloned into .deps/llama.cpp"
}

# Builds the llama/ggml static libraries (CPU) and the reference tools later issues compare against.
build_llama() {
  local stamp="$DEPS/llama/.mmserve-built"
  if [[ -f "$stamp" ]]; then
    step "llama.cpp libraries: present in .deps/llama"
    return
  fi
  step "llama.cpp libraries: building (static, CPU, ccache; first build takes several minutes)"
  cmake -S "$DEPS/llama.cpp" -B "$DEPS/llama-build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$DEPS/llama" \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DGGML_CUDA="${MMSERVE_CUDA:-OFF}" -DGGML_CANN="${MMSERVE_CANN:-OFF}" >/dev/null
  cmake --build "$DEPS/llama-build" -j "$JOBS" -- -d stats | grep -E '^\[|FAILED|error' | awk 'NR % 20 == 0 || /FAILED|error/' || true
  cmake --build "$DEPS/llama-build" -j "$JOBS" >/dev/null
  cmake --install "$DEPS/llama-build" >/dev/null
  touch "$stamp"
}

build_mmserve() {
  step "mmserve: configuring and building (build/)"
  cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DMMSERVE_LLAMA_PREFIX="$DEPS/llama" >/dev/null
  cmake --build "$ROOT/build" -j "$JOBS"
}

install_packages
fetch_llama
build_llama
[[ "${1:-}" == "--deps-only" ]] || build_mmserve
