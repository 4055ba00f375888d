// Paths of the generated GGUF models (tools/gen_models.py, run by scripts/setup.sh) and of
// llama.cpp's reference programs built from the same bundle.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "testing/paths.h"
#include "testing/test_util.h"

namespace mmserve::testing {

inline std::string GeneratedModel(const std::string& file) {
  return SourceDir() + "/models/generated/" + file;
}

// A copy of the generated model `model` in `dir` as `name`, with the first occurrence of `find`
// replaced by `patch` (the same length): a corrupt file for tests of hostile models.
inline std::filesystem::path PatchedModel(const TempDir& dir, const std::string& model,
                                          const std::string& name, const std::string& find,
                                          const std::string& patch) {
  std::string bytes = ReadFile(GeneratedModel(model));
  const size_t at = bytes.find(find);
  if (at == std::string::npos || patch.size() != find.size()) {
    ADD_FAILURE() << model << " holds no \"" << find
                  << "\" to patch (or the patch's length differs)";
  } else {
    bytes.replace(at, find.size(), patch);
  }
  return dir.Write(name, bytes);
}

inline std::string LlamaTool(const std::string& name) {
  return SourceDir() + "/.deps/llama-cpu-build/bin/" + name;
}

}  // namespace mmserve::testing
