#include "runtime/device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/logging.h"

namespace mmserve {
namespace {

std::string ReadPid(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid;
}

}  // namespace

std::filesystem::path DeviceLock::DefaultDir() {
  if (const char* dir = std::getenv("MMSERVE_LOCK_DIR"); dir && *dir) return dir;
  return "/tmp/mmserve-locks";
}

Result<DeviceLock> DeviceLock::Acquire(const std::filesystem::path& dir, int device) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto path = dir / ("device-" + std::to_string(device) + ".lock");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return FailedPrecondition("cannot open device lock " + path.string() + ": " +
                              std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = ReadPid(fd);
    ::close(fd);
    return FailedPrecondition("device " + std::to_string(device) +
                              " is already served by another mmserve (pid " +
                              (holder.empty() ? "unknown" : holder) + ", lock " + path.string() +
                              ")");
  }
  // Locked: whatever PID the file names is dead (the kernel released its lock).
  if (const std::string previous = ReadPid(fd); !previous.empty()) {
    spdlog::info("device {}: took over the lock left by exited process {}", device, previous);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    spdlog::warn("device {}: could not record pid in {}", device, path.string());
  }
  return DeviceLock(fd, device);
}

DeviceLock& DeviceLock::operator=(DeviceLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    device_ = other.device_;
  }
  return *this;
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) {
    // Empty the file first so a later reader never names a PID that no longer holds it.
    if (::ftruncate(fd_, 0) != 0) {
      // Nothing to do: the lock itself is released by close().
    }
    ::close(fd_);
  }
}

}  // namespace mmserve
