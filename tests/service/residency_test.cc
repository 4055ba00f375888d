#include "service/residency.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/identity/identity_backend.h"
#include "config/config_parser.h"
#include "runtime/host_runtime.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using Kind = Residency::Step::Kind;
constexpr int64_t kMiB = 1 << 20;

// Three identity models of 40 MiB each under a 100 MiB pool (a 90 MiB budget): two fit, three
// do not. Residency decides; the test does what the lifecycle would (load, evict).
class ResidencyTest : public ::testing::Test {
 protected:
  ResidencyTest() { backends_.Register(std::make_unique<IdentityBackend>(host_)); }

  void Start(const std::string& models) {
    auto config = ParseConfig("global: {memory_pool: 100}\nmodels:\n" + models, "test.yaml",
                              backends_);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    registry_ = std::make_unique<ModelRegistry>(*config, TimeSource::Real());
    for (const auto& m : config->models) {
      auto version = std::make_shared<ModelVersion>(m, "host");
      versions_[m.name] = version;
      registry_->Publish(m.name, ServedModel::Make({{m.version, version}}, m, false));
    }
    residency_ = std::make_unique<Residency>(*config, backends_, *registry_, TimeSource::Real(),
                                             events_);
  }
  // Loads `name` as the lifecycle would, resident since `ready_at`.
  void Load(const std::string& name, Clock::time_point ready_at) {
    ModelVersion& v = *versions_.at(name);
    auto loaded = std::make_shared<LoadedModel>();
    auto session = backends_.Find("identity").value()->Load(v.config(), nullptr);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    loaded->session = std::move(*session);
    auto scheduler = ModelScheduler::Create({.model = name}, *loaded->session);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status().ToString();
    loaded->scheduler = std::move(*scheduler);
    v.BeginLoad();
    v.FinishLoad(std::move(loaded), {.ready_at = ready_at, .now = Clock::now()});
  }
  void Evict(const std::string& name) {
    ModelVersion& v = *versions_.at(name);
    ASSERT_TRUE(v.BeginEviction());
    v.FinishUnload("evicted", "evicted");
  }
  ModelVersion& version(const std::string& name) { return *versions_.at(name); }

  HostRuntime host_;
  BackendRegistry backends_;
  EventLog events_;
  std::unique_ptr<ModelRegistry> registry_;
  std::unique_ptr<Residency> residency_;
  std::map<std::string, std::shared_ptr<ModelVersion>> versions_;
};

constexpr const char* kThree = R"(  - name: a
    backend: identity
    priority: 3
    params: {memory_mb: 40}
  - name: b
    backend: identity
    priority: 5
    params: {memory_mb: 40}
  - name: c
    backend: identity
    load: on_demand
    params: {memory_mb: 40}
)";

TEST_F(ResidencyTest, ALoadNobodyWaitsForEvictsTheLowestPriorityIdleOneThenFits) {
  Start(kThree);
  const auto long_ago = Clock::now() - std::chrono::hours(1);
  Load("a", long_ago);
  Load("b", long_ago);
  const std::vector<DomainUsage> domains = residency_->Domains();
  ASSERT_EQ(domains.size(), 1u);
  EXPECT_EQ(domains[0].budget, 90 * kMiB);
  EXPECT_EQ(domains[0].used, 80 * kMiB);

  Residency::Step step = residency_->NextStep(version("c"), 40 * kMiB, false);
  ASSERT_EQ(step.kind, Kind::kEvict);
  EXPECT_EQ(step.victim.get(), &version("b")) << "priority 5 goes before 3";
  EXPECT_EQ(step.why, "evicted to make room for c v1 (40 MiB needed on device host)");
  Evict("b");
  EXPECT_EQ(residency_->NextStep(version("c"), 40 * kMiB, false).kind, Kind::kFits);

  // Larger than the budget, once the others are gone: refused, and says why.
  step = residency_->NextStep(version("c"), 200 * kMiB, false);
  ASSERT_EQ(step.kind, Kind::kEvict);
  Evict("a");
  step = residency_->NextStep(version("c"), 200 * kMiB, false);
  ASSERT_EQ(step.kind, Kind::kRefuse);
  EXPECT_THAT(step.refused.message(), HasSubstr("the model is larger than the budget"));
}

TEST_F(ResidencyTest, APinnedOrBusyModelIsNotEvictedForALoadNobodyWaitsFor) {
  Start(R"(  - name: a
    backend: identity
    pinned: true
    params: {memory_mb: 40}
  - name: b
    backend: identity
    params: {memory_mb: 40}
  - name: c
    backend: identity
    load: on_demand
    params: {memory_mb: 40}
)");
  Load("a", Clock::now() - std::chrono::hours(1));
  Load("b", Clock::now() - std::chrono::hours(1));
  ASSERT_TRUE(version("b").Borrow(Clock::now()));  // a request in flight
  const Residency::Step step = residency_->NextStep(version("c"), 40 * kMiB, false);
  ASSERT_EQ(step.kind, Kind::kRefuse);
  EXPECT_THAT(step.refused.message(),
              HasSubstr("held by a v1 40 MiB (pinned), b v1 40 MiB (in use)"));
}

// Requests waiting for the load may take a busy model's place — once it has been resident for
// its minimum: until then the load gives way (or, when it may not, drains it).
TEST_F(ResidencyTest, ADemandLoadGivesWayToAYoungVictimThenDrainsIt) {
  Start(kThree);
  Load("a", Clock::now() - std::chrono::hours(1));
  Load("b", Clock::now());  // just loaded: 1 s of minimum residency
  ASSERT_TRUE(version("a").Borrow(Clock::now()));
  ASSERT_TRUE(version("b").Borrow(Clock::now()));
  auto request = std::make_unique<InferRequest>();
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  request->deadline = deadline;
  ASSERT_TRUE(version("c").Admit(request, Clock::now(), [] {
    return [](std::unique_ptr<InferRequest>, WaitEnd) {};
  }).parked);

  Residency::Step step = residency_->NextStep(version("c"), 40 * kMiB, true);
  ASSERT_EQ(step.kind, Kind::kGiveWay);
  EXPECT_THAT(step.why, HasSubstr("b v1 may be evicted in"));
  EXPECT_LE(step.until, Clock::now() + std::chrono::milliseconds(100));

  step = residency_->NextStep(version("c"), 40 * kMiB, false);
  ASSERT_EQ(step.kind, Kind::kDrain);
  EXPECT_EQ(step.victim.get(), &version("b"));
  EXPECT_EQ(step.until, deadline) << "the drain is bounded by the waiting request's deadline";
  EXPECT_THAT(step.refused.message(), HasSubstr("nothing can be evicted in time"));
}

}  // namespace
}  // namespace mmserve
