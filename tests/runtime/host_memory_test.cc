// HostMemory in a container: the memory cgroup's limit bounds the machine's RAM.
#include <gtest/gtest.h>

#include "runtime/runtime.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kTotal = 256 * kGiB, kFree = 200 * kGiB;  // the node's

class HostMemoryTest : public ::testing::Test {
 protected:
  testing::TempDir root_;
};

TEST_F(HostMemoryTest, NoCgroupIsTheMachine) {
  const DeviceMemory m = HostMemoryIn(root_.path(), "", kTotal, kFree);
  EXPECT_EQ(m.domain, "host");
  EXPECT_EQ(m.total, kTotal);
  EXPECT_EQ(m.free, kFree);
}

TEST_F(HostMemoryTest, CgroupV2LimitOfThePodBoundsTheContainer) {
  // A pod limit of 8 GiB on the pod's cgroup; the container's own says "max".
  root_.Write("kubepods/pod1/memory.max", std::to_string(8 * kGiB) + "\n");
  root_.Write("kubepods/pod1/memory.current", std::to_string(3 * kGiB) + "\n");
  root_.Write("kubepods/pod1/ctr/memory.max", "max\n");
  root_.Write("kubepods/pod1/ctr/memory.current", std::to_string(3 * kGiB) + "\n");
  const DeviceMemory m = HostMemoryIn(root_.path(), "0::/kubepods/pod1/ctr\n", kTotal, kFree);
  EXPECT_EQ(m.total, 8 * kGiB);
  EXPECT_EQ(m.free, 5 * kGiB);
}

TEST_F(HostMemoryTest, TheTightestLimitWins) {
  root_.Write("a/memory.max", std::to_string(4 * kGiB));
  root_.Write("a/b/memory.max", std::to_string(6 * kGiB));
  EXPECT_EQ(HostMemoryIn(root_.path(), "0::/a/b", kTotal, kFree).total, 4 * kGiB);
  // A container namespace's own root ("/") with a limit at the top of what it sees.
  root_.Write("memory.max", std::to_string(2 * kGiB));
  EXPECT_EQ(HostMemoryIn(root_.path(), "0::/", kTotal, kFree).total, 2 * kGiB);
}

TEST_F(HostMemoryTest, CgroupV1MemoryControllerOnAHybridHost) {
  root_.Write("memory/docker/abc/memory.limit_in_bytes", std::to_string(16 * kGiB));
  root_.Write("memory/docker/abc/memory.usage_in_bytes", std::to_string(1 * kGiB));
  root_.Write("memory.max", std::to_string(kGiB));  // the v2 hierarchy: not the one that limits
  const DeviceMemory m = HostMemoryIn(
      root_.path(), "0::/\n5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n", kTotal, kFree);
  EXPECT_EQ(m.total, 16 * kGiB);
  EXPECT_EQ(m.free, 15 * kGiB);
}

TEST_F(HostMemoryTest, NoLimitAndGarbageLeaveTheMachine) {
  root_.Write("memory/x/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "none"
  EXPECT_EQ(HostMemoryIn(root_.path(), "4:memory:/x", kTotal, kFree).total, kTotal);
  root_.Write("y/memory.max", "-5");
  root_.Write("z/memory.max", "12abc");
  EXPECT_EQ(HostMemoryIn(root_.path(), "0::/y", kTotal, kFree).total, kTotal);
  EXPECT_EQ(HostMemoryIn(root_.path(), "0::/z", kTotal, kFree).total, kTotal);
  EXPECT_EQ(HostMemoryIn(root_.path(), "0::/../../etc", kTotal, kFree).total, kTotal);
  EXPECT_EQ(HostMemoryIn(root_.path(), "garbage without colons", kTotal, kFree).total, kTotal);
}

TEST_F(HostMemoryTest, UsageAboveTheLimitIsNoFreeMemory) {
  root_.Write("c/memory.max", std::to_string(kGiB));
  root_.Write("c/memory.current", std::to_string(2 * kGiB));
  EXPECT_EQ(HostMemoryIn(root_.path(), "0::/c", kTotal, kFree).free, 0);
}

}  // namespace
}  // namespace mmserve
