#include "service/model_version.h"

#include <gtest/gtest.h>

#include "backend/identity/identity_backend.h"
#include "runtime/host_runtime.h"

namespace mmserve {
namespace {

using S = VersionState;

// What the lifecycle hands FinishLoad: an identity model's session and scheduler.
std::shared_ptr<LoadedModel> LoadedIdentity(const ModelConfig& config) {
  static HostRuntime host;
  IdentityBackend backend(host);
  auto loaded = std::make_shared<LoadedModel>();
  auto session = backend.Load(config, nullptr);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  loaded->session = std::move(*session);
  auto scheduler = ModelScheduler::Create({.model = config.name}, *loaded->session);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status().ToString();
  loaded->scheduler = std::move(*scheduler);
  return loaded;
}

// The request path's side: how each parked request's wait ended.
std::vector<WaitEnd::Kind> ended;
ModelVersion::Admission Admit(ModelVersion& version, std::unique_ptr<InferRequest>& request,
                              Clock::time_point now) {
  return version.Admit(request, now, [] {
    return [](std::unique_ptr<InferRequest> r, WaitEnd end) {
      EXPECT_TRUE(r) << "the request comes back with its wait's end";
      ended.push_back(end.kind);
    };
  });
}

// The lifecycle's load, from the version's side.
void LoadIdentity(ModelVersion& version) {
  version.BeginLoad();
  version.FinishLoad(LoadedIdentity(version.config()), {.now = Clock::now()});
}

TEST(ModelVersionTest, TheStateMachineHasTheDrawnEdgesOnly) {
  // Loads end ready or failed; only a ready version unloads; an unload ends where it was aimed.
  EXPECT_TRUE(IsLegalTransition(S::kUnloaded, S::kLoading));
  EXPECT_TRUE(IsLegalTransition(S::kOnDemand, S::kLoadingOnDemand));
  EXPECT_TRUE(IsLegalTransition(S::kLoading, S::kReady));
  EXPECT_TRUE(IsLegalTransition(S::kLoading, S::kFailed));
  EXPECT_TRUE(IsLegalTransition(S::kLoadingOnDemand, S::kReady));
  EXPECT_TRUE(IsLegalTransition(S::kReady, S::kUnloading));
  EXPECT_TRUE(IsLegalTransition(S::kUnloading, S::kOnDemand));
  EXPECT_TRUE(IsLegalTransition(S::kUnloading, S::kHeld));
  EXPECT_TRUE(IsLegalTransition(S::kFailed, S::kBackingOff));       // its waiters answered
  EXPECT_TRUE(IsLegalTransition(S::kBackingOff, S::kLoadingOnDemand));  // after the back-off
  EXPECT_FALSE(IsLegalTransition(S::kFailed, S::kLoadingOnDemand))
      << "a load someone told that failed loads again only when told";
  EXPECT_TRUE(IsLegalTransition(S::kHeld, S::kLoading));            // LoadModel
  EXPECT_TRUE(IsLegalTransition(S::kReady, S::kDraining));          // room for another load
  EXPECT_TRUE(IsLegalTransition(S::kDraining, S::kUnloading));      // ... evicted
  EXPECT_TRUE(IsLegalTransition(S::kDraining, S::kReady));          // ... still busy: serves on
  // What the machine forbids: a ready version loading again, a load skipping its end, an
  // unload of what is not loaded, leaving held without a load.
  EXPECT_FALSE(IsLegalTransition(S::kReady, S::kLoading));
  EXPECT_FALSE(IsLegalTransition(S::kReady, S::kUnloaded));
  EXPECT_FALSE(IsLegalTransition(S::kLoading, S::kUnloaded));
  EXPECT_FALSE(IsLegalTransition(S::kUnloaded, S::kReady));
  EXPECT_FALSE(IsLegalTransition(S::kOnDemand, S::kUnloading));
  EXPECT_FALSE(IsLegalTransition(S::kHeld, S::kOnDemand));
  EXPECT_FALSE(IsLegalTransition(S::kUnloading, S::kReady));
  int edges = 0;
  for (int from = 0; from <= static_cast<int>(S::kHeld); ++from) {
    EXPECT_FALSE(IsLegalTransition(static_cast<S>(from), static_cast<S>(from)))
        << VersionStateName(static_cast<S>(from)) << " to itself";
    for (int to = 0; to <= static_cast<int>(S::kHeld); ++to) {
      edges += IsLegalTransition(static_cast<S>(from), static_cast<S>(to));
    }
  }
  EXPECT_EQ(edges, 28) << "an edge added or removed: redraw model_version.h";
}

TEST(ModelVersionTest, FrontendsSeeTheRepositoryApisStates) {
  EXPECT_EQ(PublicState(S::kOnDemand), ModelState::kNotLoaded);
  EXPECT_EQ(PublicState(S::kLoadingOnDemand), ModelState::kLoading);
  EXPECT_EQ(PublicState(S::kFailed), ModelState::kUnavailable);
  EXPECT_EQ(PublicState(S::kHeld), ModelState::kUnavailable);
  EXPECT_EQ(PublicState(S::kDraining), ModelState::kReady);  // it still serves what it holds
  EXPECT_EQ(ModelStateName(PublicState(S::kReady)), "READY");
}

TEST(ModelVersionTest, AnOnDemandVersionStartsLoadableAndSaysSo) {
  ModelConfig config;
  config.name = "m";
  config.version = 2;
  config.load = LoadMode::kOnDemand;
  ModelVersion version(config, "host");
  const ModelInfo info = version.Snapshot();
  EXPECT_EQ(info.state, ModelState::kNotLoaded);
  EXPECT_EQ(info.reason, "loads on its first request (load: on_demand)");
  EXPECT_EQ(version.VersionName(), "m v2");
}

// What a retired load counted stays the version's (its counters never go backwards), and the
// last minute counts it against the sample taken before it.
TEST(ModelVersionTest, RetiredCountsAreCarriedAndTheLastMinuteCountsThem) {
  ModelConfig config;
  config.name = "m";
  ModelVersion version(config, "host");
  EXPECT_FALSE(version.Snapshot().stats);  // never loaded: nothing counted
  EXPECT_FALSE(version.Snapshot().last_minute);
  version.SampleMinute();
  SchedulerStats retired;
  retired.success = 3;
  retired.failure = 1;
  for (int i = 0; i < 4; ++i) retired.request_latency.Record(2'000'000);
  version.CarryRetired(retired, {{"generated_tokens", 40}, {"prompt_cache_bytes", 99}}, {});
  version.CarryRetired(retired, {{"generated_tokens", 2}}, {});
  const ModelInfo info = version.Snapshot();
  ASSERT_TRUE(info.stats);
  EXPECT_EQ(info.stats->success, 6);
  EXPECT_EQ(info.stats->request_latency.count, 8);
  EXPECT_EQ(info.counters.at("generated_tokens"), 42);
  EXPECT_FALSE(info.counters.contains("prompt_cache_bytes"));  // a gauge is not carried
  ASSERT_TRUE(info.last_minute);
  EXPECT_EQ(info.last_minute->requests, 8);
  EXPECT_EQ(info.last_minute->errors, 2);
  EXPECT_EQ(info.last_minute->generated_tokens, 42);
  EXPECT_GT(info.last_minute->p50, 0.001);
}

// Admission is the version's decision: one request per state, and single flight on demand.
TEST(ModelVersionTest, AdmitServesParksOrRejectsByState) {
  using namespace std::chrono_literals;
  ModelConfig config;
  config.name = "m";
  config.load = LoadMode::kOnDemand;
  ModelVersion version(config, "host");
  const auto now = Clock::now();
  auto request = [] { return std::make_unique<InferRequest>(); };

  auto first = request();
  ModelVersion::Admission a = Admit(version, first, now);
  EXPECT_TRUE(a.start_load) << "the first request starts the load";
  EXPECT_TRUE(a.rejected.ok());
  EXPECT_FALSE(first) << "parked: the version holds it";
  auto second = request();
  a = Admit(version, second, now);
  EXPECT_FALSE(a.start_load) << "single flight: the second waits for the same load";
  EXPECT_FALSE(second);

  // The load fails: both are answered with its error, and the back-off starts.
  EXPECT_EQ(version.view().state, S::kLoadingOnDemand);
  version.BeginLoad();
  version.FailLoad(NotFound("no such file"));
  EXPECT_FALSE(version.DemandLoadGoesAhead(true)) << "not queued any more";
  ModelVersion::Waiters waiters = version.TakeWaitersAfterLoad(true, now + 10s);
  EXPECT_EQ(waiters.requests.size(), 2u);
  EXPECT_EQ(waiters.end.kind, WaitEnd::Kind::kFail);
  EXPECT_EQ(waiters.end.error.message(), "model 'm' failed to load: no such file");
  ended.clear();
  for (auto& parked : waiters.requests) parked.End(waiters.end);
  EXPECT_EQ(ended, std::vector<WaitEnd::Kind>(2, WaitEnd::Kind::kFail));
  EXPECT_EQ(version.view().state, S::kBackingOff);
  EXPECT_EQ(version.view().reason, "no such file");

  auto during = request();
  a = Admit(version, during, now + 4s);
  EXPECT_EQ(a.rejected.code(), StatusCode::kUnavailable);
  EXPECT_NE(a.rejected.message().find("the next load is tried in 6000 ms"), std::string::npos)
      << a.rejected.message();
  EXPECT_TRUE(during) << "rejected: the caller keeps it to answer";
  auto after = request();
  a = Admit(version, after, now + 10s);
  EXPECT_TRUE(a.start_load) << "past the back-off the next request tries again";

  // Retired while its load was queued: called off, and its requests are routed anew.
  version.Retire(now);
  EXPECT_FALSE(version.DemandLoadGoesAhead(true));
  waiters = version.TakeWaitersAfterLoad(false, now);
  EXPECT_EQ(waiters.requests.size(), 1u);
  EXPECT_EQ(waiters.end.kind, WaitEnd::Kind::kRouteAnew);
  EXPECT_TRUE(waiters.end.error.ok());
  EXPECT_EQ(version.view().state, S::kOnDemand);
  EXPECT_FALSE(version.BeginUnload(S::kHeld)) << "nothing loaded to free";
  EXPECT_EQ(version.view().state, S::kHeld);
}

TEST(ModelVersionTest, AHeldOrLoadingVersionRejectsWithItsReason) {
  ModelConfig config;
  config.name = "m";
  ModelVersion version(config, "host");
  auto r = std::make_unique<InferRequest>();
  version.BeginLoad();
  ModelVersion::Admission a = Admit(version, r, Clock::now());
  EXPECT_EQ(a.rejected.message(), "model 'm' is LOADING");
  EXPECT_FALSE(a.serve);
  version.FailLoad(InvalidArgument("bad file"));
  a = Admit(version, r, Clock::now());
  EXPECT_EQ(a.rejected.message(), "model 'm' is UNAVAILABLE: bad file")
      << "a load someone told failed: no retry on request";
  EXPECT_FALSE(version.BeginUnload(S::kHeld));
  a = Admit(version, r, Clock::now());
  EXPECT_NE(a.rejected.message().find("unloaded through the repository API"), std::string::npos);
  EXPECT_TRUE(r);
}

// A version emptied for another model's load serves what it holds and parks what comes; the
// requests go through the routing again if the drain is given up (it serves on).
TEST(ModelVersionTest, ADrainingVersionParksNewRequestsForItsNextLoad) {
  ModelConfig config;
  config.name = "m";
  ModelVersion version(config, "host");
  LoadIdentity(version);
  EXPECT_EQ(version.BeginDrain("making room for big v1"), 0) << "nothing in flight";
  auto r = std::make_unique<InferRequest>();
  ModelVersion::Admission a = Admit(version, r, Clock::now());
  EXPECT_TRUE(a.rejected.ok());
  EXPECT_FALSE(a.serve);
  EXPECT_FALSE(a.start_load) << "no load of its own: the eviction's unload brings one";
  EXPECT_FALSE(r);
  EXPECT_EQ(version.Snapshot().state, ModelState::kReady);
  EXPECT_EQ(version.TakeWaiting().size(), 1u);
}

// The unloads are the version's decisions too: an idle unload only when idle long enough, an
// eviction only with nothing in flight; requests that arrive meanwhile wait for the next load.
TEST(ModelVersionTest, UnloadsTakeWhatItHoldsOnlyWhenTheyMay) {
  using namespace std::chrono_literals;
  ModelConfig config;
  config.name = "m";
  config.keep_alive = 10s;
  const auto shared = std::make_shared<ModelVersion>(config, "host");
  ModelVersion& version = *shared;
  LoadIdentity(version);
  const auto now = Clock::now();
  version.MarkUsed(now);
  ASSERT_TRUE(version.Borrow(now));
  EXPECT_EQ(version.view().in_flight, 1);
  EXPECT_FALSE(version.BeginEviction()) << "a request is in flight";
  EXPECT_FALSE(version.BeginIdleUnload(now + 1h)) << "a request is in flight";
  EXPECT_TRUE(version.Release(now)) << "the last one";
  EXPECT_FALSE(version.BeginIdleUnload(now + 9999ms)) << "idle for less than its keep_alive";
  std::shared_ptr<LoadedModel> taken = version.BeginIdleUnload(now + 10s);
  ASSERT_TRUE(taken);
  EXPECT_FALSE(version.Current()) << "the caller holds it now";
  EXPECT_EQ(version.view().state, S::kUnloading);
  EXPECT_EQ(version.view().unloading_to, S::kOnDemand);

  auto r = std::make_unique<InferRequest>();
  ModelVersion::Admission a = Admit(version, r, now + 10s);
  EXPECT_TRUE(a.rejected.ok());
  EXPECT_FALSE(a.start_load) << "the unload's end queues the load";
  taken.reset();
  EXPECT_TRUE(version.FinishUnload("unloaded after idling"))
      << "a request waits: the caller queues its load";
  EXPECT_EQ(version.view().state, S::kLoadingOnDemand);
  EXPECT_TRUE(version.DemandLoadGoesAhead(true));
  version.BeginLoad();
  version.FinishLoad(LoadedIdentity(config), {.now = now + 10s});
  ModelVersion::Waiters waiters = version.TakeWaitersAfterLoad(true, now);
  ASSERT_EQ(waiters.requests.size(), 1u);
  EXPECT_EQ(waiters.end.kind, WaitEnd::Kind::kServe);
  EXPECT_EQ(waiters.end.version, shared);
  EXPECT_EQ(waiters.end.loaded, version.Current());
  EXPECT_EQ(version.view().in_flight, 1) << "counted before the lock went";

  // An eviction counts; the repository API re-aims an unload under way at kHeld.
  ModelVersion other(config, "host");
  LoadIdentity(other);
  taken = other.BeginEviction();
  ASSERT_TRUE(taken);
  EXPECT_EQ(other.Snapshot().evictions, 1);
  EXPECT_FALSE(other.BeginUnload(S::kHeld)) << "already unloading";
  taken.reset();
  EXPECT_FALSE(other.FinishUnload("evicted", "evicted")) << "nobody waits";
  EXPECT_EQ(other.view().state, S::kHeld);
  EXPECT_EQ(other.view().reason, "unloaded through the repository API");
}

// A drain waits for the requests in flight, not for a clock: it ends drained when the last is
// released, and the requests it held back go on once it is given up.
TEST(ModelVersionTest, ADrainEndsWhenTheLastRequestIsReleasedOrIsGivenUp) {
  ModelConfig config;
  config.name = "m";
  ModelVersion version(config, "host");
  EXPECT_FALSE(version.BeginDrain("room")) << "only a ready version drains";
  LoadIdentity(version);
  const auto now = Clock::now();
  ASSERT_TRUE(version.Borrow(now));
  EXPECT_EQ(version.BeginDrain("making room for big v1"), 1);
  EXPECT_EQ(version.WaitDrained(Clock::now()), ModelVersion::DrainEnd::kTimedOut);
  auto r = std::make_unique<InferRequest>();
  EXPECT_TRUE(Admit(version, r, now).rejected.ok());
  EXPECT_FALSE(r) << "parked for its next load";
  version.Release(now);
  EXPECT_EQ(version.WaitDrained(Clock::now()), ModelVersion::DrainEnd::kDrained);
  EXPECT_TRUE(version.EndDrain()) << "a request was held back";
  EXPECT_EQ(version.view().state, S::kReady);
  EXPECT_FALSE(version.EndDrain()) << "not draining any more";
  EXPECT_EQ(version.WaitDrained(Clock::now()), ModelVersion::DrainEnd::kChanged);
}

// The reaper takes the waiters whose deadline passed, in their arrival order, and leaves the
// others waiting in theirs.
TEST(ModelVersionTest, TakeExpiredTakesThosePastTheirDeadlineInArrivalOrder) {
  using namespace std::chrono_literals;
  ModelConfig config;
  config.name = "m";
  config.load = LoadMode::kOnDemand;
  ModelVersion version(config, "host");
  const auto now = Clock::now();
  for (const auto& [id, after] : {std::pair{"a", 1s}, {"b", 3s}, {"c", 2s}, {"d", 4s}}) {
    auto r = std::make_unique<InferRequest>();
    r->id = id;
    r->deadline = now + after;
    ASSERT_TRUE(Admit(version, r, now).parked);
  }
  std::vector<std::string> taken;
  for (const ParkedRequest& p : version.TakeExpired(now + 2s)) taken.push_back(p.request->id);
  EXPECT_EQ(taken, (std::vector<std::string>{"a", "c"}));
  taken.clear();
  for (const ParkedRequest& p : version.TakeWaiting()) taken.push_back(p.request->id);
  EXPECT_EQ(taken, (std::vector<std::string>{"b", "d"}));
}

}  // namespace
}  // namespace mmserve
