// AclRuntime through RuntimeGuard against the simulated libascendcl: one aclInit, owned or
// foreign (100002), reference-counted init, device open/close, memory, and clean errors when
// the library is absent.
#include "runtime/acl_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/runtime_guard.h"
#include "testing/acl_sim.h"

namespace mmserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::AclSim;

std::vector<std::string> Calls(const AclSim& sim) {
  std::vector<std::string> out;
  for (const auto& line : sim.Record()) out.push_back(line.substr(0, line.find(' ')));
  return out;
}

TEST(AclRuntimeTest, WithoutTheLibraryEverythingSaysAscendClNotFound) {
  AclRuntime runtime({"/nonexistent/lib64/libascendcl.so"});
  auto api = runtime.Api();
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("AscendCL not found"));
  EXPECT_THAT(api.status().message(), HasSubstr("/nonexistent/lib64/libascendcl.so"));
  EXPECT_EQ(runtime.DeviceCount(), -1) << "unknown, so device ids are not range-checked";
  auto memory = runtime.Memory(1);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->domain, "acl:1");
  EXPECT_EQ(memory->total, 0);
  RuntimeGuard guard;
  auto lease = guard.Acquire(runtime, 0);
  ASSERT_FALSE(lease.ok());
  EXPECT_THAT(lease.status().message(), HasSubstr("AscendCL not found"));
  EXPECT_EQ(guard.Describe(), "");
}

TEST(AclRuntimeTest, ALibraryWithoutTheEntryPointsIsRefusedByName) {
  AclRuntime runtime({"libm.so.6"});
  auto api = runtime.Api();
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("lacks required entry points: aclInit"));
}

TEST(AclRuntimeTest, TheGuardInitializesOnceAndFinalizesLast) {
  AclSim sim = AclSim::Reset(R"({"devices": 2, "memory_mb": 512})");
  AclRuntime runtime({testing::AclSimLibrary()});
  EXPECT_EQ(runtime.DeviceCount(), 2);
  {
    RuntimeGuard guard;
    auto a = guard.Acquire(runtime, 0);
    auto b = guard.Acquire(runtime, 1);
    auto c = guard.Acquire(runtime, 0);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ(guard.Describe(), "acl(owned) acl:0 acl:1");
    auto memory = runtime.Memory(1);
    ASSERT_TRUE(memory.ok()) << memory.status().ToString();
    EXPECT_EQ(memory->domain, "acl:1");
    EXPECT_EQ(memory->total, int64_t{512} << 20);
    EXPECT_EQ(memory->free, int64_t{512} << 20);
  }
  EXPECT_THAT(Calls(sim),
              ElementsAre("aclInit", "aclrtSetDevice", "aclrtSetDevice",  // open 0, 1
                          "aclrtSetDevice", "aclrtGetMemInfo", "aclrtResetDevice",  // Memory(1)
                          "aclrtResetDevice", "aclrtResetDevice",  // close 1, then 0
                          "aclFinalizeReference"));
  EXPECT_THAT(sim.Record()[6], StartsWith("aclrtResetDevice device=1"));
}

TEST(AclRuntimeTest, AnInitBySomeoneElseIsAbsorbedAndNeverFinalized) {
  AclSim sim = AclSim::Reset();
  // Someone else in the process (torch_npu, another library) initialized AscendCL first.
  auto acl_init = reinterpret_cast<int (*)(const char*)>(sim.Symbol("aclInit"));
  ASSERT_EQ(acl_init(nullptr), 0);
  AclRuntime runtime({testing::AclSimLibrary()});
  {
    RuntimeGuard guard;
    auto lease = guard.Acquire(runtime, 0);
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    EXPECT_EQ(guard.Describe(), "acl(foreign) acl:0");
  }
  EXPECT_THAT(Calls(sim), ElementsAre("aclInit", "aclInit", "aclrtSetDevice", "aclrtResetDevice"));
  EXPECT_THAT(sim.Record()[1], HasSubstr("-> 100002"));
  // Still initialized for its owner.
  auto set_device = reinterpret_cast<int (*)(int32_t)>(sim.Symbol("aclrtSetDevice"));
  EXPECT_EQ(set_device(0), 0);
}

TEST(AclRuntimeTest, AReferenceCountedInitReleasesOnlyItsOwnReference) {
  AclSim sim = AclSim::Reset(R"({"refcounted_init": true})");
  auto acl_init = reinterpret_cast<int (*)(const char*)>(sim.Symbol("aclInit"));
  ASSERT_EQ(acl_init(nullptr), 0);  // the other owner's reference
  AclRuntime runtime({testing::AclSimLibrary()});
  {
    RuntimeGuard guard;
    auto lease = guard.Acquire(runtime, 0);
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(guard.Describe(), "acl(owned) acl:0");
  }
  const auto record = sim.Record();
  ASSERT_FALSE(record.empty());
  EXPECT_THAT(record.back(), StartsWith("aclFinalizeReference refcount=1")) << "the other's stays";
  for (const auto& line : record) EXPECT_THAT(line, ::testing::Not(StartsWith("aclFinalize ")));
}

TEST(AclRuntimeTest, ErrorsNameTheCodeItsMeaningAndAscendClsOwnText) {
  AclSim sim = AclSim::Reset();
  AclRuntime runtime({testing::AclSimLibrary()});
  RuntimeGuard guard;
  auto lease = guard.Acquire(runtime, 7);
  ASSERT_FALSE(lease.ok());
  const std::string message(lease.status().message());
  EXPECT_THAT(message, HasSubstr("aclrtSetDevice returned 107001 ACL_ERROR_RT_INVALID_DEVICEID "
                                 "(invalid device id)"));
  EXPECT_THAT(message, HasSubstr("AscendCL says: EE1001: invalid device id 7"));
  EXPECT_EQ(guard.Describe(), "acl(owned)")
      << "the failed open unwound to the init, which AscendCL cannot repeat in a process";
  EXPECT_EQ(sim.Calls("aclFinalizeReference").size(), 0u);
}

TEST(AclRuntimeTest, AclInitIsNeverRepeatedAfterTheLastLeaseGoes) {
  AclSim sim = AclSim::Reset();
  AclRuntime runtime({testing::AclSimLibrary()});
  {
    RuntimeGuard guard;
    for (int cycle = 0; cycle < 3; ++cycle) {
      auto lease = guard.Acquire(runtime, 0);
      ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    }
    EXPECT_EQ(guard.Describe(), "acl(owned)") << "the device closed, the runtime kept";
    EXPECT_EQ(sim.Calls("aclrtResetDevice").size(), 3u);
  }
  EXPECT_EQ(sim.Calls("aclInit").size(), 1u);
  EXPECT_EQ(sim.Calls("aclFinalizeReference").size(), 1u) << "by the guard's destructor";
}

TEST(AclRuntimeTest, TheSimulatorRefusesAclInitAfterAclFinalize) {
  AclSim sim = AclSim::Reset();
  auto init = reinterpret_cast<int (*)(const char*)>(sim.Symbol("aclInit"));
  auto finalize = reinterpret_cast<int (*)()>(sim.Symbol("aclFinalize"));
  ASSERT_EQ(init(nullptr), 0);
  ASSERT_EQ(finalize(), 0);
  EXPECT_EQ(init(nullptr), 100002) << "CANN cannot initialize a finalized process again";
}

TEST(AclRuntimeTest, TheErrorTableKnowsTheDocumentedCodes) {
  EXPECT_EQ(acl::ErrorName(100002), "ACL_ERROR_REPEAT_INITIALIZE");
  EXPECT_EQ(acl::ErrorName(507046), "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT");
  // Device memory and model/device state are the server's, never the client's (no 4xx).
  EXPECT_EQ(acl::ErrorStatusCode(207001), StatusCode::kUnavailable);
  EXPECT_EQ(acl::ErrorStatusCode(507014), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(acl::ErrorStatusCode(507008), StatusCode::kUnavailable);
  EXPECT_EQ(acl::ErrorStatusCode(100012), StatusCode::kUnavailable);
  EXPECT_EQ(acl::ErrorStatusCode(507011), StatusCode::kInternal);
  EXPECT_EQ(acl::ErrorStatusCode(145013), StatusCode::kInternal);
  EXPECT_EQ(acl::ErrorName(509999), "unknown aclError");
  EXPECT_THAT(acl::ErrorMeaning(509999), HasSubstr("internal software or hardware fault"));
}

}  // namespace
}  // namespace mmserve
