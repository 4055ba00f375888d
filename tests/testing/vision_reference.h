// tests/testing/vision_reference.py from C++: the Python reference (OpenCV's bindings, numpy)
// that the image stages' tests compare with, and the raw arrays it writes.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/paths.h"
#include "testing/test_util.h"

namespace mmserve::testing {

// Runs the reference over `cases` (the script's docstring says their fields); false, with a
// test failure that shows its output, when it fails.
inline bool RunVisionReference(const TempDir& dir, const nlohmann::json& cases) {
  auto [code, out] = RunShell("/usr/bin/python3 " + SourceDir() +
                              "/tests/testing/vision_reference.py " +
                              dir.Write("cases.json", cases.dump()).string() + " 2>&1");
  EXPECT_EQ(code, 0) << out;
  return code == 0;
}

// A raw little-endian array of T the reference wrote.
template <typename T>
std::vector<T> ReadRaw(const std::filesystem::path& path) {
  const std::string bytes = ReadFile(path);
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace mmserve::testing
