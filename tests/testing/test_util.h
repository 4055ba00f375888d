// Helpers shared by tests: temporary directories and files.
#pragma once

// MMSERVE_TEST_SANITIZED: this build replaces the allocator (ASan or TSan), so malloc's counters
// and the RSS no longer measure what a test reads from them. GCC says so with __SANITIZE_*__,
// clang with __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MMSERVE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MMSERVE_TEST_SANITIZED 1
#endif
#endif

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
// A memory field of /proc/PID/status ("VmRSS", "VmHWM"), in KiB; 0 when it cannot be read.
long ProcessMemoryKib(int pid, const std::string& field);

// Runs `command` with /bin/sh; returns its exit code and what it wrote to stdout.
std::pair<int, std::string> RunShell(const std::string& command);

// A TCP port on 127.0.0.1 that was free a moment ago (bound and released): for a peer server
// that takes its port on the command line.
int FreePort();
// A TCP connection to 127.0.0.1:`port` (a raw socket, for tests that write bytes themselves or
// drop a connection mid-answer); -1 when it cannot connect.
int Connect(int port);
// POSTs `body` to `target` on a connection of its own, waits for the answer's first bytes (a
// stream has started) and closes the connection: a client that leaves mid-answer. False when
// the server could not be reached or answered nothing.
bool PostAndLeave(int port, const std::string& target, const std::string& body);

}  // namespace mmserve::testing
