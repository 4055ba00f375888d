#include "runtime/device_lock.h"

#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace
}  // namespace mmserve
