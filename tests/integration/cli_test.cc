// `mmserve validate`, `doctor` and `version` as a user runs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/server_process.h"
#include "testing/seed_config.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using testing::kSeed;

using ::testing::HasSubstr;
using testing::ServerProcess;


TEST(CliTest, ValidateAcceptsTheSeedConfiguration) {
  testing::TempDir dir;
  dir.Write("person_det.om", "om");
  auto [code, out] = ServerProcess::Run({"validate", dir.Write("m.yaml", kSeed).string()});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("valid, 1 model"));
  EXPECT_THAT(out, HasSubstr("person_det v1: backend acl, task infer, device 0"));
}

TEST(CliTest, ValidatePrintsEveryErrorAndFails) {
  testing::TempDir dir;
  std::string broken = kSeed;
  broken.replace(broken.find("timeout_ms: 200"), 15, "timeout: 200");
  broken.replace(broken.find("thread_num: 2"), 13, "thread_num: zero");
  const auto file = dir.Write("m.yaml", broken);
  auto [code, out] = ServerProcess::Run({"validate", file.string()});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("3 configuration errors:"));
  EXPECT_THAT(out, HasSubstr(file.string() + ":7:11: models[0].path: expected an existing file"));
  EXPECT_THAT(out, HasSubstr(file.string() + ":14:5: models[0].timeout: expected one of"));
  EXPECT_THAT(out, HasSubstr(file.string() + ":16:17: models[0].thread_num: expected an integer "
                             "in 1..256, found \"zero\""));
}

TEST(CliTest, ServeRefusesAnInvalidConfigurationBeforeLoadingAnything) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run(
      {"serve", dir.Write("m.yaml", "models:\n  - name: a\n    backend: identity\n    "
                                    "priority: 0\n").string(), "--port", "0"});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(out, HasSubstr(":4:15: models[0].priority: expected high, normal, low"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("loaded")));
}

constexpr const char* kTooBig = R"(global: {memory_pool: 100}
models:
  - {name: small, backend: identity, params: {memory_mb: 10}}
  - {name: big, backend: identity, params: {memory_mb: 80}}
  - {name: later, backend: identity, load: on_demand, params: {memory_mb: 60}}
)";

TEST(CliTest, ServeRefusesStartupModelsThatDoNotFitAndPrintsThePlan) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run({"serve", dir.Write("m.yaml", kTooBig).string(),
                                         "--port", "0", "--lock-dir", dir.path().string()});
  EXPECT_EQ(code, 4) << out;
  EXPECT_THAT(out, HasSubstr("refusing to start: the start-up models do not fit in device "
                             "host's memory budget"));
  EXPECT_THAT(out, HasSubstr("device host: budget 100.0 MiB (global.memory_pool)"));
  EXPECT_THAT(out, HasSubstr("big v1"));
  EXPECT_THAT(out, HasSubstr("80.0 MiB  identity params.memory_mb"));
  EXPECT_THAT(out, HasSubstr("start-up total 90.0 MiB x 1.20 = 108.0 MiB exceeds 90% of the "
                             "budget (90.0 MiB): DOES NOT FIT"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("loaded")));
}

TEST(CliTest, ValidatePlanPrintsThePlanWithoutLoading) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run({"validate", "--plan", dir.Write("m.yaml", kTooBig).string()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("memory plan:"));
  EXPECT_THAT(out, HasSubstr("DOES NOT FIT"));
  std::string fits = kTooBig;
  fits.replace(fits.find("memory_mb: 80"), 13, "memory_mb: 40");
  auto [ok_code, ok_out] = ServerProcess::Run({"validate", "--plan", dir.Write("f.yaml", fits).string()});
  EXPECT_EQ(ok_code, 0) << ok_out;
  EXPECT_THAT(ok_out, HasSubstr("start-up total 50.0 MiB x 1.20 = 60.0 MiB within 90% of the "
                                "budget (90.0 MiB): fits"));
}

TEST(CliTest, DoctorReportsTheHostAndNeverFailsWithoutAccelerators) {
  testing::TempDir dir;
  auto [code, out] = ServerProcess::Run({"doctor", "--lock-dir", dir.path().string()});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("cpu:"));
  EXPECT_THAT(out, HasSubstr("memory:"));
  EXPECT_THAT(out, HasSubstr("backends compiled in: acl, identity, llama"));
  EXPECT_THAT(out, HasSubstr("AscendCL: "));
  EXPECT_THAT(out, HasSubstr("CUDA: "));
  EXPECT_THAT(out, HasSubstr("no mmserve holds a device"));
}

TEST(CliTest, VersionPrintsTheVersion) {
  auto [code, out] = ServerProcess::Run({"version"});
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("mmserve 0.1.0"));
}

}  // namespace
}  // namespace mmserve
