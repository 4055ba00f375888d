// DeviceLock: one mmserve per device. An advisory flock(2) on <dir>/device-<id>.lock, with the
// holder's PID written inside so a refused server can name it. The kernel drops the lock when
// its holder dies, so a stale lock file from a dead process is simply taken over; a holder that
// exits cleanly removes the file, so a clean shutdown leaves nothing behind.
//
// The directory is trusted only if this user owns it and no one else may write to it, and the
// lock file is opened without following a link: a link or file planted by another local user
// can neither redirect the PID write (a root server would overwrite any file) nor hold the lock.
//
// Move-only; the lock is held until destruction.
#pragma once

#include <filesystem>

#include "common/result.h"

namespace mmserve {

class DeviceLock {
 public:
  // Locks `device` under `dir` (created 0700 if missing). FailedPrecondition naming the holder's
  // PID when another live process holds it, and naming the fault when `dir` is another user's
  // or writable by others, or the lock file is a link or not this user's regular file.
  static Result<DeviceLock> Acquire(const std::filesystem::path& dir, int device);
  // The directory used when none is given: $MMSERVE_LOCK_DIR, else a per-user runtime
  // directory: /run/mmserve for root, $XDG_RUNTIME_DIR/mmserve for others (where set), else
  // /tmp/mmserve-locks-<uid>.
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
