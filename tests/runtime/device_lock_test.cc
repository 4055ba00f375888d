#include "runtime/device_lock.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;

TEST(DeviceLockTest, SecondHolderIsRefusedWithTheHoldersPid) {
  testing::TempDir dir;
  auto first = DeviceLock::Acquire(dir.path(), 0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = DeviceLock::Acquire(dir.path(), 0);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("device 0 is already served by another mmserve (pid " +
                        std::to_string(::getpid()) + ","));
  EXPECT_TRUE(DeviceLock::Acquire(dir.path(), 1).ok()) << "other devices stay free";
}

TEST(DeviceLockTest, LockIsFreeAgainAfterRelease) {
  testing::TempDir dir;
  { auto lock = DeviceLock::Acquire(dir.path(), 0); ASSERT_TRUE(lock.ok()); }
  EXPECT_TRUE(DeviceLock::Acquire(dir.path(), 0).ok());
}

TEST(DeviceLockTest, StaleLockOfADeadProcessIsTakenOver) {
  testing::TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) {
    // The child takes the lock and dies without releasing it (no destructors run).
    auto lock = DeviceLock::Acquire(dir.path(), 0);
    ::_exit(lock.ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(testing::ReadFile(dir.path() / "device-0.lock"), std::to_string(child) + "\n");

  auto lock = DeviceLock::Acquire(dir.path(), 0);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_EQ(testing::ReadFile(dir.path() / "device-0.lock"), std::to_string(::getpid()) + "\n");
}

// F3 (hardening round 2): a local user must not make a root server write through a planted
// link, nor hold its lock from a directory they can write to.
TEST(DeviceLockTest, ALinkPlantedAsTheLockFileIsRefusedAndItsTargetUntouched) {
  testing::TempDir dir;
  const auto victim = dir.Write("victim", "precious\n");
  std::filesystem::create_directory(dir.path() / "locks");
  std::filesystem::create_symlink(victim, dir.path() / "locks" / "device-0.lock");
  auto lock = DeviceLock::Acquire(dir.path() / "locks", 0);
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(std::string(lock.status().message()), HasSubstr("it is a symbolic link"));
  EXPECT_EQ(testing::ReadFile(victim), "precious\n");
}

TEST(DeviceLockTest, ADirectoryOthersCanWriteToIsRefused) {
  testing::TempDir dir;
  const auto open = dir.path() / "open";
  std::filesystem::create_directory(open);
  ASSERT_EQ(::chmod(open.c_str(), 01777), 0);
  auto lock = DeviceLock::Acquire(open, 0);
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(std::string(lock.status().message()), HasSubstr("is writable by other users"));
  EXPECT_THAT(std::string(lock.status().message()), HasSubstr("--lock-dir or MMSERVE_LOCK_DIR"));
  EXPECT_FALSE(std::filesystem::exists(open / "device-0.lock"));
}

TEST(DeviceLockTest, ADirectoryOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a directory to another user needs root";
  testing::TempDir dir;
  const auto theirs = dir.path() / "theirs";
  std::filesystem::create_directory(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  auto lock = DeviceLock::Acquire(theirs, 0);
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(std::string(lock.status().message()), HasSubstr("belongs to uid 65534"));
}

TEST(DeviceLockTest, AMissingDirectoryIsCreatedForThisUserAlone) {
  testing::TempDir dir;
  const auto made = dir.path() / "a" / "locks";
  auto lock = DeviceLock::Acquire(made, 0);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(DeviceLockTest, TheDefaultDirectoryIsPerUserUnlessTheEnvironmentNamesOne) {
  const char* saved = std::getenv("MMSERVE_LOCK_DIR");
  const std::string kept = saved ? saved : "";
  ::unsetenv("MMSERVE_LOCK_DIR");
  if (::geteuid() == 0) {
    EXPECT_EQ(DeviceLock::DefaultDir(), "/run/mmserve");
  } else {
    EXPECT_NE(DeviceLock::DefaultDir().string().find("mmserve"), std::string::npos);
  }
  ::setenv("MMSERVE_LOCK_DIR", "/somewhere/else", 1);
  EXPECT_EQ(DeviceLock::DefaultDir(), "/somewhere/else");
  if (saved) {
    ::setenv("MMSERVE_LOCK_DIR", kept.c_str(), 1);
  } else {
    ::unsetenv("MMSERVE_LOCK_DIR");
  }
}

}  // namespace
}  // namespace mmserve
