// DeviceLock: one mmserve per device. An advisory flock(2) on <dir>/device-<id>.lock, with the
// holder's PID written inside so a refused server can name it. The kernel drops the lock when
// its holder dies, so a stale lock file from a dead process is simply taken over; a holder that
// exits cleanly removes the file, so a clean shutdown leaves nothing behind.
//
// Move-only; the lock is held until destruction.
#pragma once

#include <filesystem>

#include "common/result.h"

namespace mmserve {

class DeviceLock {
 public:
  // Locks `device` under `dir` (created if missing). FailedPrecondition naming the holder's PID
  // when another live process holds it.
  static Result<DeviceLock> Acquire(const std::filesystem::path& dir, int device);
  // The directory used when none is given: $MMSERVE_LOCK_DIR, else /tmp/mmserve-locks.
  static std::filesystem::path DefaultDir();

  DeviceLock(DeviceLock&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), device_(other.device_), path_(std::move(other.path_)) {}
  DeviceLock& operator=(DeviceLock&& other) noexcept;
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;
  ~DeviceLock();

  int device() const { return device_; }

 private:
  DeviceLock(int fd, int device, std::filesystem::path path)
      : fd_(fd), device_(device), path_(std::move(path)) {}
  int fd_ = -1;
  int device_ = -1;
  std::filesystem::path path_;
};

}  // namespace mmserve
