// Helpers shared by tests: temporary directories and files.
#pragma once

#include <filesystem>
#include <string>
#include <utility>

namespace mmserve::testing {

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `contents` to path()/name and returns the full path.
  std::filesystem::path Write(const std::string& name, const std::string& contents) const;

 private:
  std::filesystem::path path_;
};

std::string ReadFile(const std::filesystem::path& path);

// Runs `command` with /bin/sh; returns its exit code and what it wrote to stdout.
std::pair<int, std::string> RunShell(const std::string& command);

}  // namespace mmserve::testing
