// Paths of the generated GGUF models (tools/gen_models.py, run by scripts/setup.sh) and of
// llama.cpp's reference programs built from the same bundle.
#pragma once

#include <string>

namespace mmserve::testing {

inline std::string GeneratedModel(const std::string& file) {
  return std::string(MMSERVE_SOURCE_DIR) + "/models/generated/" + file;
}

inline std::string LlamaTool(const std::string& name) {
  return std::string(MMSERVE_SOURCE_DIR) + "/.deps/llama-tools-build/bin/" + name;
}

}  // namespace mmserve::testing
