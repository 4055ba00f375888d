#include "service/memory_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/identity/identity_backend.h"
#include "config/config_parser.h"
#include "runtime/host_runtime.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class MemoryPlanTest : public ::testing::Test {
 protected:
  MemoryPlanTest() { backends_.Register(std::make_unique<IdentityBackend>(host_)); }
  std::vector<DevicePlan> Plan(const std::string& yaml) {
    auto config = ParseConfig(yaml, "test.yaml", backends_);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return PlanMemory(*config, backends_);
  }
  HostRuntime host_;
  BackendRegistry backends_;
};

TEST_F(MemoryPlanTest, StartupEstimatesTimesTheFactorMustFitUnderTheFilledBudget) {
  // A 100 MiB pool, 90 % = a 90 MiB budget; start-up: (40 + 30) x 1.2 = 84 MiB fits.
  auto plans = Plan(R"(global: {memory_pool: 100}
models:
  - {name: a, backend: identity, params: {memory_mb: 40}}
  - {name: b, backend: identity, params: {memory_mb: 30}}
  - {name: c, backend: identity, load: on_demand, params: {memory_mb: 70}}
)");
  ASSERT_EQ(plans.size(), 1u);
  const DevicePlan& p = plans[0];
  EXPECT_EQ(p.domain, "host");
  EXPECT_EQ(p.capacity, 100 << 20);
  EXPECT_EQ(p.budget, 90 << 20);
  EXPECT_EQ(p.budget_source, "memory_pool 100.0 MiB x preflight.max_fill 0.90");
  EXPECT_EQ(p.startup_bytes, 70 << 20);
  EXPECT_EQ(p.required(), static_cast<int64_t>((70 << 20) * 1.2));
  EXPECT_TRUE(p.fits());
  ASSERT_EQ(p.entries.size(), 3u);
  EXPECT_FALSE(p.entries[2].startup) << "on-demand models are listed, not counted";
  EXPECT_EQ(p.entries[0].source, "identity params.memory_mb");

  const std::string table = FormatPlan(plans);
  EXPECT_THAT(table, HasSubstr("device host: budget 90.0 MiB (memory_pool 100.0 MiB x "
                               "preflight.max_fill 0.90); the device has "));
  EXPECT_THAT(table, HasSubstr("c v1"));
  EXPECT_THAT(table, HasSubstr("on_demand"));
  EXPECT_THAT(table, HasSubstr("start-up total 70.0 MiB x 1.20 = 84.0 MiB within the budget "
                               "(90.0 MiB, 90% of 100.0 MiB): fits"));
}

TEST_F(MemoryPlanTest, AnOnDemandModelLargerThanTheBudgetDoesNotFit) {
  auto plans = Plan(R"(global: {memory_pool: 100}
models:
  - {name: a, backend: identity, params: {memory_mb: 40}}
  - {name: c, backend: identity, load: on_demand, params: {memory_mb: 80}}
)");
  ASSERT_EQ(plans.size(), 1u);
  const DevicePlan& p = plans[0];
  EXPECT_TRUE(p.within_budget());  // the start-up total: 48 MiB
  EXPECT_FALSE(p.fits_alone(p.entries[1]));  // 80 x 1.2 = 96 MiB > 90 MiB
  EXPECT_FALSE(p.fits());
  const std::string table = FormatPlan(plans);
  EXPECT_THAT(table, HasSubstr("but a model alone exceeds the budget: DOES NOT FIT"));
  EXPECT_THAT(table, HasSubstr("model 'c' v1 alone needs 80.0 MiB x 1.2 = 96.0 MiB"));
  EXPECT_THAT(table, Not(HasSubstr("to fit, remove")));
}

TEST_F(MemoryPlanTest, TooMuchDoesNotFitAndTheFactorsAreConfigurable) {
  const char* yaml = R"(global: {memory_pool: 100%s}
models:
  - {name: a, backend: identity, params: {memory_mb: 40}}
  - {name: b, backend: identity, params: {memory_mb: 40}}
)";
  char text[512];
  std::snprintf(text, sizeof(text), yaml, "");
  auto plans = Plan(text);
  EXPECT_FALSE(plans[0].fits()) << "80 x 1.2 = 96 > 90";
  EXPECT_THAT(FormatPlan(plans), HasSubstr("DOES NOT FIT"));
  std::snprintf(text, sizeof(text), yaml, ", preflight: {factor: 1.0, max_fill: 0.8}");
  EXPECT_TRUE(Plan(text)[0].fits()) << "80 x 1.0 = 80 <= 80";
}

TEST_F(MemoryPlanTest, WithoutAPoolTheBudgetIsTheCapacityTimesMaxFillOnce) {
  auto plans = Plan("global: {preflight: {max_fill: 0.5}}\n"
                    "models: [{name: a, backend: identity}]\n");
  const DeviceMemory host = HostMemory();
  ASSERT_GT(host.total, 0);
  EXPECT_EQ(plans[0].budget, host.total / 2);
  EXPECT_THAT(plans[0].budget_source, HasSubstr("x preflight.max_fill 0.50"));
}

}  // namespace
}  // namespace mmserve
