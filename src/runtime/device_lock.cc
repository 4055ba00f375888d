#include "runtime/device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
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
  if (::geteuid() == 0) return "/run/mmserve";
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && *runtime) {
    return std::filesystem::path(runtime) / "mmserve";
  }
  return "/tmp/mmserve-locks-" + std::to_string(::geteuid());
}

namespace {

// OK when `dir` is a directory this user owns that no one else may write to; it is created
// (0700) when missing.
Status CheckLockDir(const std::filesystem::path& dir) {
  const std::string fix = " (choose another with --lock-dir or MMSERVE_LOCK_DIR)";
  std::error_code ec;
  if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return FailedPrecondition("cannot create the device lock directory " + dir.string() + ": " +
                              std::strerror(errno));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return FailedPrecondition("cannot read the device lock directory " + dir.string() + ": " +
                              std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return FailedPrecondition("the device lock directory " + dir.string() +
                              " is not a directory" + fix);
  }
  if (st.st_uid != ::geteuid()) {
    return FailedPrecondition("the device lock directory " + dir.string() + " belongs to uid " +
                              std::to_string(st.st_uid) + ", not to this user (uid " +
                              std::to_string(::geteuid()) +
                              "): its owner could plant or hold the lock" + fix);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return FailedPrecondition("the device lock directory " + dir.string() +
                              " is writable by other users: they could plant or hold the lock" +
                              fix);
  }
  return Status::Ok();
}

}  // namespace

Result<DeviceLock> DeviceLock::Acquire(const std::filesystem::path& dir, int device) {
  if (Status s = CheckLockDir(dir); !s.ok()) return s;
  const auto path = dir / ("device-" + std::to_string(device) + ".lock");
  // The holder unlinks the file when it is done; a file locked after its holder unlinked it is
  // stale, so open again until the locked file is the one at `path`.
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      return FailedPrecondition("cannot open device lock " + path.string() + ": " +
                                (errno == ELOOP ? std::string("it is a symbolic link")
                                                : std::string(std::strerror(errno))));
    }
    struct stat opened {};
    if (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_uid != ::geteuid()) {
      ::close(fd);
      return FailedPrecondition("device lock " + path.string() +
                                " is not a regular file of this user's; remove it");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const std::string holder = ReadPid(fd);
      ::close(fd);
      return FailedPrecondition("device " + std::to_string(device) +
                                " is already served by another mmserve (pid " +
                                (holder.empty() ? "unknown" : holder) + ", lock " +
                                path.string() + "): stop it, or serve another device, or "
                                "keep this server's locks apart with --lock-dir or "
                                "MMSERVE_LOCK_DIR");
    }
    // The file's identity (from the fstat above) against the path's now that it is locked.
    struct stat named {};
    if (::stat(path.c_str(), &named) != 0 || opened.st_ino != named.st_ino ||
        opened.st_dev != named.st_dev) {
      ::close(fd);
      fd = -1;
    }
  }
  if (fd < 0) return FailedPrecondition("device lock " + path.string() + " keeps changing");
  // Locked: whatever PID the file names is dead (the kernel released its lock).
  if (const std::string previous = ReadPid(fd); !previous.empty()) {
    spdlog::info("device {}: took over the lock left by exited process {}", device, previous);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    spdlog::warn("device {}: could not record pid in {}", device, path.string());
  }
  return DeviceLock(fd, device, path);
}

DeviceLock& DeviceLock::operator=(DeviceLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::unlink(path_.c_str());
      ::close(fd_);
    }
    fd_ = std::exchange(other.fd_, -1);
    device_ = other.device_;
    path_ = std::move(other.path_);
  }
  return *this;
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) {
    // Removed while still held, so nothing is left behind; a process that opened the file
    // meanwhile sees it is no longer the one at the path (Acquire) and opens again.
    ::unlink(path_.c_str());
    ::close(fd_);
  }
}

}  // namespace mmserve
