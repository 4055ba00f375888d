#include "service/inference_service.h"

#include <malloc.h>

#include <cstring>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "backend/identity/identity_backend.h"
#include "common/logging.h"
#include "config/config_parser.h"
#include "runtime/host_runtime.h"
#include "testing/fake_time.h"
#include "testing/service_util.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using testing::Submit;

using ::testing::HasSubstr;

class InferenceServiceTest : public ::testing::Test {
 protected:
  InferenceServiceTest() { backends_.Register(std::make_unique<IdentityBackend>(host_)); }

  // `time` decides keep-alive, back-off and retirement (a FakeTime where time is the subject).
  std::unique_ptr<InferenceService> Start(const std::string& yaml,
                                          const TimeSource& time = TimeSource::Real()) {
    auto config = ParseConfig(yaml, "test.yaml", backends_);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    auto service =
        std::make_unique<InferenceService>(std::move(*config), backends_, guard_, time);
    service->LoadStartupModels();
    return service;
  }

  static Result<InferResponse> Infer(InferenceService& service, std::unique_ptr<InferRequest> r) {
    return Submit(service, std::move(r)).get();
  }

  static std::unique_ptr<InferRequest> Ints(const std::string& model, std::vector<int32_t> v,
                                            const std::string& input = "INPUT0",
                                            DataType type = DataType::kInt32) {
    auto r = std::make_unique<InferRequest>();
    r->model_name = model;
    r->inputs.emplace_back(input, type, Shape{static_cast<int64_t>(v.size())},
                           std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    return r;
  }

  HostRuntime host_;
  BackendRegistry backends_;
  RuntimeGuard guard_;
};

constexpr const char* kTwoModels = R"(models:
  - name: a
    backend: identity
    params: {tensors: [{input: INPUT0, output: OUTPUT0, datatype: INT32, shape: [-1]},
                       {input: EXTRA, output: EXTRA_OUT, datatype: INT32, shape: [-1], optional: true}]}
  - name: b
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [2]}]}
)";

TEST_F(InferenceServiceTest, ServesLoadedModelsAndIsReady) {
  auto service = Start(kTwoModels);
  EXPECT_TRUE(service->Ready());
  auto result = Infer(*service, Ints("a", {1, 2, 3}));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->outputs[0].name(), "OUTPUT0");
  EXPECT_EQ(result->outputs[0].shape(), Shape{3});
  EXPECT_EQ(guard_.Describe(), "host(owned) host:0");
}

TEST_F(InferenceServiceTest, ValidatesRequestsAgainstTheSignature) {
  auto service = Start(kTwoModels);
  EXPECT_EQ(Infer(*service, Ints("nope", {1})).status().ToString(),
            "NotFound: unknown model 'nope'");
  EXPECT_EQ(Infer(*service, Ints("a", {1}, "INPUT0", DataType::kUint32)).status().message(),
            "model 'a': input 'INPUT0': expected datatype INT32, found UINT32");
  EXPECT_EQ(Infer(*service, Ints("b", {1, 2, 3})).status().message(),
            "model 'b': input 'INPUT0': expected shape [2], found [3]");
  EXPECT_EQ(Infer(*service, Ints("a", {1}, "EXTRA")).status().message(),
            "model 'a': missing input 'INPUT0'");
  EXPECT_THAT(std::string(Infer(*service, Ints("a", {1}, "OTHER")).status().message()),
              HasSubstr("unknown input 'OTHER'; the model's inputs are INPUT0, EXTRA"));
  auto twice = Ints("a", {1});
  twice->inputs.push_back(twice->inputs[0]);
  EXPECT_EQ(Infer(*service, std::move(twice)).status().message(),
            "model 'a': input 'INPUT0' is given more than once");
  auto wrong_version = Ints("a", {1});
  wrong_version->model_version = 2;
  EXPECT_EQ(Infer(*service, std::move(wrong_version)).status().code(), StatusCode::kNotFound);
}

TEST_F(InferenceServiceTest, ReturnsOnlyRequestedOutputs) {
  auto service = Start(kTwoModels);
  auto r = Ints("a", {1});
  r->inputs.emplace_back("EXTRA", DataType::kInt32, Shape{1}, std::string(4, '\0'));
  r->requested_outputs = {"EXTRA_OUT"};
  auto result = Infer(*service, std::move(r));
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->outputs.size(), 1u);
  EXPECT_EQ(result->outputs[0].name(), "EXTRA_OUT");
}

TEST_F(InferenceServiceTest, AModelThatFailsToLoadDoesNotStopTheOthers) {
  ASSERT_TRUE(std::ofstream("/tmp/mmserve-service-test.om").good());
  auto service = Start(std::string(kTwoModels) +
                       "  - name: detector\n    path: /tmp/mmserve-service-test.om\n");
  EXPECT_FALSE(service->Ready());
  auto info = service->GetModel("detector");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, ModelState::kUnavailable);
  EXPECT_EQ(info->reason, "backend 'acl' is not built into this mmserve");
  EXPECT_EQ(Infer(*service, Ints("detector", {1})).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Infer(*service, Ints("a", {1})).ok());
}

TEST_F(InferenceServiceTest, ShutdownDrainsThenUnloadsAndRejectsNewWork) {
  auto service = Start(R"(models:
  - name: slow
    backend: identity
    params: {latency_ms: 100, tensors: [{datatype: INT32}]}
)");
  auto in_flight = Submit(*service, Ints("slow", {1}));
  service->Shutdown(std::chrono::seconds(5));
  EXPECT_TRUE(in_flight.get().ok()) << "the request in flight finished";
  EXPECT_EQ(Infer(*service, Ints("slow", {1})).status().ToString(),
            "Unavailable: the server is shutting down");
  EXPECT_EQ(service->GetModel("slow")->state, ModelState::kNotLoaded);
  EXPECT_EQ(guard_.Describe(), "") << "the runtime was released";
}

TEST_F(InferenceServiceTest, DeadlineFromTimeoutMsExpiresQueuedRequests) {
  auto service = Start(R"(models:
  - name: slow
    backend: identity
    timeout_ms: 30
    params: {latency_ms: 100, tensors: [{datatype: INT32}]}
)");
  auto first = Submit(*service, Ints("slow", {1}));
  const Status queued = Infer(*service, Ints("slow", {2})).status();
  EXPECT_EQ(queued.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(queued.message()), HasSubstr("in the queue; it was not executed"));
  // The first ran past its 30 ms: answered 504 at the deadline, its late result discarded.
  const Status executed = first.get().status();
  EXPECT_EQ(executed.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(executed.message()), HasSubstr("its result is discarded"));
}

TEST_F(InferenceServiceTest, AModelsWorkersRunAtItsNiceValueOnItsCores) {
  auto service = Start(R"(models:
  - {name: a, backend: identity, priority: high}
  - {name: c, backend: identity, priority: low, nice: 10, cpu_affinity: [0], thread_num: 2}
)");
  auto a = service->GetModel("a");
  ASSERT_TRUE(a.ok() && a->stats);
  EXPECT_EQ(a->stats->workers[0].nice, 0);
  auto c = service->GetModel("c");
  ASSERT_EQ(c->stats->workers.size(), 2u);
  for (const auto& w : c->stats->workers) {
    EXPECT_EQ(w.nice, 10);
    EXPECT_EQ(w.cores, std::vector<int>{0});
  }
}

TEST_F(InferenceServiceTest, SchedulingParametersAreCheckedAndNameTheField) {
  auto service = Start(kTwoModels);
  auto r = Ints("a", {1});
  r->parameters["priority"] = int64_t{10};
  EXPECT_EQ(Infer(*service, std::move(r)).status().message(),
            "model 'a': parameters.priority: expected a level in 1..9 (1 is highest; 0 = the "
            "model's default)");
  r = Ints("a", {1});
  r->parameters["timeout"] = 1.5;
  EXPECT_THAT(std::string(Infer(*service, std::move(r)).status().message()),
              HasSubstr("parameters.timeout: expected a positive number of microseconds"));
  r = Ints("a", {1});
  r->parameters["priority"] = int64_t{1};
  r->parameters["timeout"] = int64_t{5'000'000};
  EXPECT_TRUE(Infer(*service, std::move(r)).ok());
}

TEST_F(InferenceServiceTest, AnOpenBreakerMakesTheModelUnavailableWithTheReason) {
  auto service = Start(R"(models:
  - name: flaky
    backend: identity
    breaker: {failures: 2, cooldown_ms: 60000}
    params: {fail_every_n: 1, tensors: [{datatype: INT32}]}
  - name: fine
    backend: identity
    params: {tensors: [{datatype: INT32}]}
)");
  EXPECT_EQ(Infer(*service, Ints("flaky", {1})).status().code(), StatusCode::kInternal);
  EXPECT_EQ(service->GetModel("flaky")->state, ModelState::kReady);
  EXPECT_EQ(Infer(*service, Ints("flaky", {1})).status().code(), StatusCode::kInternal);
  auto info = service->GetModel("flaky");
  EXPECT_EQ(info->state, ModelState::kUnavailable);
  EXPECT_THAT(info->reason, HasSubstr("circuit breaker open: 2 consecutive failures"));
  EXPECT_EQ(info->stats->failure, 2);
  EXPECT_EQ(Infer(*service, Ints("flaky", {1})).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Infer(*service, Ints("fine", {1})).ok());
}

TEST_F(InferenceServiceTest, FiftyConcurrentFirstRequestsLoadAnOnDemandModelOnce) {
  auto service = Start(R"(models:
  - name: lazy
    backend: identity
    load: on_demand
    params: {load_ms: 200, tensors: [{datatype: INT32}]}
)");
  EXPECT_TRUE(service->Ready()) << "on-demand models do not hold readiness back";
  EXPECT_EQ(service->GetModel("lazy")->state, ModelState::kNotLoaded);
  std::vector<std::future<Result<InferResponse>>> results;
  for (int i = 0; i < 50; ++i) results.push_back(Submit(*service, Ints("lazy", {i})));
  for (int i = 0; i < 50; ++i) {
    auto r = results[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    int32_t v;
    std::memcpy(&v, r->outputs[0].data().data(), 4);
    EXPECT_EQ(v, i);
  }
  auto info = service->GetModel("lazy");
  EXPECT_EQ(info->state, ModelState::kReady);
  EXPECT_EQ(info->loads, 1);
}

TEST_F(InferenceServiceTest, AFailedOnDemandLoadAnswersEveryWaiterWithItsError) {
  testing::TempDir dir;
  const std::string om = dir.Write("det.om", "om").string();
  auto service = Start("models:\n  - {name: det, path: " + om + ", load: on_demand}\n"
                       "  - {name: fine, backend: identity, params: {tensors: [{datatype: INT32}]}}\n");
  std::vector<std::future<Result<InferResponse>>> results;
  for (int i = 0; i < 5; ++i) results.push_back(Submit(*service, Ints("det", {i})));
  for (auto& f : results) {
    auto r = f.get();
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("model 'det' failed to load: "));
  }
  EXPECT_EQ(service->GetModel("det")->loads, 1);
  EXPECT_TRUE(Infer(*service, Ints("fine", {1})).ok());
}

TEST_F(InferenceServiceTest, LoadedModelsNeverWaitForAnotherModelsLoad) {
  auto service = Start(R"(models:
  - {name: quick, backend: identity, params: {tensors: [{datatype: INT32}]}}
  - {name: slow_to_load, backend: identity, load: on_demand, params: {load_ms: 3000, tensors: [{datatype: INT32}]}}
)");
  auto loading = Submit(*service, Ints("slow_to_load", {1}));
  for (int i = 0; i < 500 && service->GetModel("slow_to_load")->state != ModelState::kLoading; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(service->GetModel("slow_to_load")->state, ModelState::kLoading);
  EXPECT_TRUE(Infer(*service, Ints("quick", {2})).ok());
  // Answered while the other load still runs (its state, not a clock, says so).
  EXPECT_EQ(service->GetModel("slow_to_load")->state, ModelState::kLoading);
  EXPECT_TRUE(loading.get().ok());
}

TEST_F(InferenceServiceTest, ARequestWaitingForALoadIsAnsweredAtItsDeadline) {
  auto service = Start(R"(models:
  - {name: lazy, backend: identity, load: on_demand, params: {load_ms: 3000, tensors: [{datatype: INT32}]}}
)");
  auto r = Ints("lazy", {1});
  r->parameters["timeout"] = int64_t{100'000};
  auto early = Submit(*service, std::move(r));
  auto patient = Submit(*service, Ints("lazy", {2}));
  auto result = early.get();
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("waiting for the model to load"));
  EXPECT_EQ(service->GetModel("lazy")->state, ModelState::kLoading) << "answered before the load ended";
  EXPECT_TRUE(patient.get().ok()) << "the load went on for the others";
}

TEST_F(InferenceServiceTest, KeepAliveUnloadsAnIdleModelAndItsMemoryGoesBack) {
#if defined(MMSERVE_TEST_SANITIZED)
  GTEST_SKIP() << "the sanitizer replaces the allocator whose counters show the memory going back";
#endif
  auto heap = [] {
    const struct mallinfo2 m = ::mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
  };
  testing::FakeTime time;
  auto service = Start(R"(models:
  - {name: idle, backend: identity, keep_alive: 10m, params: {memory_mb: 64, tensors: [{datatype: INT32}]}}
)",
                       time);
  ASSERT_TRUE(Infer(*service, Ints("idle", {1})).ok());
  const int64_t loaded = heap();
  // The reaper looks every 50 ms of real time; only the injected time says the model is idle.
  time.Advance(std::chrono::minutes(10) - std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(service->GetModel("idle")->state, ModelState::kReady) << "idle for 9m59s of 10m";
  time.Advance(std::chrono::seconds(1));
  for (int i = 0; i < 100 && service->GetModel("idle")->state != ModelState::kNotLoaded; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto info = service->GetModel("idle");
  EXPECT_EQ(info->state, ModelState::kNotLoaded);
  EXPECT_THAT(info->reason, HasSubstr("loads on its next request"));
  EXPECT_GE(loaded - heap(), int64_t{60} << 20) << "the 64 MiB went back to the system";
  EXPECT_TRUE(service->Ready()) << "an idle start-up model still counts as servable";
  // The next request loads it again.
  ASSERT_TRUE(Infer(*service, Ints("idle", {2})).ok());
  EXPECT_EQ(service->GetModel("idle")->loads, 2);
}

// Three 40 MiB models in a 100 MiB budget: loading the third must evict one.
constexpr const char* kCrowded = R"(global: {memory_pool: 100, preflight: {factor: 1.0, max_fill: 1.0}}
models:
  - {name: low, backend: identity, priority: low, params: {memory_mb: 40, tensors: [{datatype: INT32}]}}
  - {name: normal, backend: identity, params: {memory_mb: 40, tensors: [{datatype: INT32}]}}
  - {name: third, backend: identity, load: on_demand, params: {memory_mb: 40, tensors: [{datatype: INT32}]}}
)";

TEST_F(InferenceServiceTest, ALoadEvictsTheLowestPriorityIdleModelFirst) {
  auto service = Start(kCrowded);
  ASSERT_TRUE(Infer(*service, Ints("low", {1})).ok());  // low is the most recently used
  ASSERT_TRUE(Infer(*service, Ints("third", {1})).ok());
  EXPECT_EQ(service->GetModel("low")->state, ModelState::kNotLoaded);
  EXPECT_THAT(service->GetModel("low")->reason, HasSubstr("evicted to make room"));
  EXPECT_EQ(service->GetModel("normal")->state, ModelState::kReady);
  // The evicted model comes back on its next request, evicting in turn.
  ASSERT_TRUE(Infer(*service, Ints("low", {2})).ok());
  EXPECT_EQ(service->GetModel("low")->loads, 2);
}

// The status page's events and memory bars: what happened, to whom, and why; who holds what.
TEST_F(InferenceServiceTest, EventsSayWhatHappenedAndDevicesWhoHoldsWhat) {
  auto service = Start(kCrowded);
  auto kinds = [&](const std::string& model) {
    std::vector<std::string> out;
    for (const Event& e : service->events().Since(0)) {
      if (e.model == model) out.push_back(e.kind);
    }
    return out;
  };
  EXPECT_THAT(kinds("low"), ::testing::ElementsAre("loading", "loaded"));
  auto devices = service->Devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].domain, "host");
  EXPECT_EQ(devices[0].budget, int64_t{100} << 20);
  EXPECT_EQ(devices[0].used, int64_t{80} << 20);
  EXPECT_EQ(devices[0].holders.size(), 2u);

  ASSERT_TRUE(Infer(*service, Ints("third", {1})).ok());  // evicts low
  EXPECT_THAT(kinds("low"), ::testing::ElementsAre("loading", "loaded", "evicted"));
  const auto low = service->GetModel("low");
  ASSERT_TRUE(low->last_event.has_value());
  EXPECT_EQ(low->last_event->kind, "evicted");
  EXPECT_THAT(low->last_event->message,
              HasSubstr("evicted to make room for third v1 (40 MiB needed on device host)"));
  EXPECT_EQ(service->GetModel("third")->last_event->kind, "loaded");
  EXPECT_THAT(service->GetModel("third")->last_event->message, HasSubstr("holds 40.0 MiB"));
  devices = service->Devices();
  EXPECT_EQ(devices[0].used, int64_t{80} << 20);
  std::set<std::string> holders;
  for (const auto& [name, bytes] : devices[0].holders) holders.insert(name);
  EXPECT_THAT(holders, ::testing::ElementsAre("normal v1", "third v1"));
}

TEST_F(InferenceServiceTest, BreakerTripsAndRecoveriesAreEvents) {
  auto service = Start(R"(models:
  - name: flaky
    backend: identity
    breaker: {failures: 2, cooldown_ms: 60000}
    params: {fail_every_n: 1, tensors: [{datatype: INT32}]}
)");
  const uint64_t before = service->events().last_seq();
  EXPECT_FALSE(Infer(*service, Ints("flaky", {1})).ok());
  EXPECT_TRUE(service->events().Since(before).empty());  // one failure opens nothing
  EXPECT_FALSE(Infer(*service, Ints("flaky", {1})).ok());
  auto events = service->events().Since(before);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "breaker_open");
  EXPECT_EQ(events[0].model, "flaky");
  EXPECT_EQ(events[0].version, 1);
  EXPECT_THAT(events[0].message, HasSubstr("2 consecutive failures"));
}

TEST_F(InferenceServiceTest, AtEqualPriorityTheLeastRecentlyUsedGoesAndPinnedNever) {
  std::string yaml = kCrowded;
  yaml.replace(yaml.find("priority: low, "), 15, "");
  // A demand load ranks victims by reload time x request rate before recency. Their request
  // rates decay to nothing over the injected minutes, so the costs tie whatever each load took
  // (seconds under TSan, where a cost of 1.45 against 1.55 s rounded apart) and recency decides.
  testing::FakeTime time;
  auto service = Start(yaml, time);
  ASSERT_TRUE(Infer(*service, Ints("normal", {1})).ok());
  time.Advance(std::chrono::minutes(1));
  ASSERT_TRUE(Infer(*service, Ints("low", {1})).ok());  // "normal" is now the older one
  time.Advance(std::chrono::minutes(1));
  ASSERT_TRUE(Infer(*service, Ints("third", {1})).ok());
  EXPECT_EQ(service->GetModel("normal")->state, ModelState::kNotLoaded);
  EXPECT_EQ(service->GetModel("low")->state, ModelState::kReady);

  yaml = kCrowded;
  yaml.replace(yaml.find("priority: low, "), 15, "pinned: true, ");
  yaml.replace(yaml.find("name: normal, backend: identity, "), 33,
               "name: normal, backend: identity, pinned: true, ");
  auto pinned = Start(yaml);
  auto refused = Infer(*pinned, Ints("third", {1}));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("not enough memory on device host: model 'third v1' needs 40 MiB, 20 MiB "
                        "of the 100 MiB budget are free, and nothing can be evicted; held by "));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("low v1 40 MiB (pinned)"));
  EXPECT_EQ(pinned->GetModel("low")->state, ModelState::kReady);
  EXPECT_EQ(pinned->GetModel("normal")->state, ModelState::kReady);
}

// Every holder busy: a load that requests wait for drains one — once it has been resident for
// its minimum, 1 s here (no thrash) — and evicts it. Requests that reach it meanwhile wait for its next
// load: none fails. (Equal priorities: the priority gate would hold a lower level's requests
// while a higher one is busy, and its drain with them.)
TEST_F(InferenceServiceTest, ADemandLoadDrainsABusyModelOnceItWasResidentLongEnough) {
  auto service = Start(R"(global: {memory_pool: 100, preflight: {factor: 1.0, max_fill: 1.0}}
models:
  - {name: busy, backend: identity, params: {memory_mb: 40, latency_ms: 5, tensors: [{datatype: INT32}]}}
  - {name: kept, backend: identity, pinned: true, params: {memory_mb: 40, latency_ms: 5, tensors: [{datatype: INT32}]}}
  - {name: third, backend: identity, load: on_demand, params: {memory_mb: 40, tensors: [{datatype: INT32}]}}
)");
  const auto started = Clock::now();
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, failed{0};
  std::vector<std::thread> clients;
  for (const char* model : {"busy", "busy", "kept", "kept"}) {
    clients.emplace_back([&, model] {
      while (!stop) {
        auto r = Infer(*service, Ints(model, {1}));
        ++(r.ok() ? answered : failed);
      }
    });
  }
  while (answered < 8) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto third = Infer(*service, Ints("third", {7}));
  const auto waited = Clock::now() - started;
  stop = true;
  for (auto& c : clients) c.join();
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(failed, 0) << "a drained model's requests wait for its next load";
  EXPECT_GE(waited, std::chrono::milliseconds(900)) << "evicted before its minimum residency";
  std::vector<std::string> evicted;
  for (const Event& e : service->events().Since(0)) {
    if (e.kind == "evicted") evicted.push_back(e.model);
  }
  ASSERT_FALSE(evicted.empty());
  EXPECT_EQ(evicted[0], "busy");
  EXPECT_GE(service->GetModel("busy")->loads, 2) << "its waiting requests loaded it again";
  EXPECT_EQ(service->GetModel("kept")->state, ModelState::kReady);
}

// A demand load that must wait for a young model's minimum residency gives way: the load queued
// behind it, which fits, goes first (the P7 stall: every load waited behind the one waiting).
TEST_F(InferenceServiceTest, ALoadWaitingForAVictimsResidencyLetsTheLoadsBehindItGoFirst) {
  auto service = Start(R"(global: {memory_pool: 100, preflight: {factor: 1.0, max_fill: 1.0}}
models:
  - {name: young, backend: identity, load: on_demand, params: {memory_mb: 60, tensors: [{datatype: INT32}]}}
  - {name: big, backend: identity, load: on_demand, params: {memory_mb: 60, tensors: [{datatype: INT32}]}}
  - {name: small, backend: identity, load: on_demand, params: {memory_mb: 30, tensors: [{datatype: INT32}]}}
)");
  ASSERT_TRUE(Infer(*service, Ints("young", {1})).ok());  // resident for its 1 s minimum from now
  auto big = std::async(std::launch::async, [&] { return Infer(*service, Ints("big", {2})); });
  while (service->GetModel("big")->reason.find("waits for room") == std::string::npos) {
    ASSERT_NE(big.wait_for(std::chrono::milliseconds(1)), std::future_status::ready)
        << "big loaded before young's minimum residency";
  }
  EXPECT_THAT(service->GetModel("big")->reason,
              HasSubstr("waits for room on device host: young v1 may be evicted in "));
  ASSERT_TRUE(Infer(*service, Ints("small", {3})).ok()) << "small fits beside young";
  EXPECT_EQ(service->GetModel("young")->state, ModelState::kReady)
      << "small loaded without waiting for young's eviction";
  auto answer = big.get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  std::vector<std::string> order;
  for (const Event& e : service->events().Since(0)) {
    if (e.kind == "loaded" || e.kind == "evicted") order.push_back(e.kind + " " + e.model);
  }
  // small (30) beside young (60); then big needs both gone (60 + 60 + 30 > 100), cheapest first.
  ASSERT_GE(order.size(), 3u);
  EXPECT_EQ(order[0], "loaded young");
  EXPECT_EQ(order[1], "loaded small");
  EXPECT_EQ(order.back(), "loaded big");
  EXPECT_EQ(service->GetModel("big")->loads, 1) << "giving way is not a load";
}

// ---- versions, labels, canary, reload, repository ----------------------------------------------

constexpr const char* kVersioned = R"(models:
  - name: m
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}]}
    versions: [1, {version: 2, params: {latency_ms: 0}}]
    labels: {stable: 1, canary: 2}
    canary: {version: 2, weight: 0.1}
)";

// Blocks until `done` of a change of the served set, and returns its outcome.
Result<ReloadReport> Wait(std::function<void(InferenceService::ReloadDone)> start) {
  std::promise<Result<ReloadReport>> promise;
  start([&](const Result<ReloadReport>& r) { promise.set_value(r); });
  return promise.get_future().get();
}

TEST_F(InferenceServiceTest, RoutesByVersionLabelAndCanaryWeight) {
  auto service = Start(kVersioned);
  auto by_version = Ints("m", {1});
  by_version->model_version = 2;
  EXPECT_EQ(Infer(*service, std::move(by_version))->model_version, 2);
  auto by_label = Ints("m", {1});
  by_label->model_label = "stable";
  EXPECT_EQ(Infer(*service, std::move(by_label))->model_version, 1);
  auto unknown = Ints("m", {1});
  unknown->model_label = "beta";
  EXPECT_EQ(Infer(*service, std::move(unknown)).status().ToString(),
            "NotFound: model 'm' has no label 'beta' (its labels: canary, stable)");
  auto missing = Ints("m", {1});
  missing->model_version = 3;
  EXPECT_EQ(Infer(*service, std::move(missing)).status().message(),
            "model 'm' has no version 3 (it serves 1, 2)");

  // Weight 0.1: 10 % ± 3 % of 10,000 unversioned requests go to the canary.
  constexpr int kRequests = 10'000;
  int canary = 0;
  for (int sent = 0; sent < kRequests; sent += 500) {  // in waves within the queue bound
    std::vector<std::future<Result<InferResponse>>> futures;
    for (int i = 0; i < 500; ++i) futures.push_back(Submit(*service, Ints("m", {sent + i})));
    for (auto& f : futures) {
      auto r = f.get();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      canary += r->model_version == 2;
    }
  }
  EXPECT_NEAR(canary, kRequests / 10, kRequests * 3 / 100) << canary << " went to the canary";

  // With a request id the draw is sticky: the same id always lands on the same version.
  for (const std::string id : {"alpha", "bravo", "charlie", "delta"}) {
    std::set<int64_t> versions;
    for (int i = 0; i < 20; ++i) {
      auto r = Ints("m", {1});
      r->id = id;
      versions.insert(Infer(*service, std::move(r))->model_version);
    }
    EXPECT_EQ(versions.size(), 1u) << id;
  }
  auto info = service->GetModel("m");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->config.version, 1);  // stable
  EXPECT_EQ(info->versions, (std::vector<int64_t>{1, 2}));
}

class ReloadTest : public InferenceServiceTest {
 protected:
  std::unique_ptr<InferenceService> StartFile(const std::string& yaml) {
    const auto file = dir_.Write("models.yaml", yaml);
    auto config = LoadConfigFile(file, backends_);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    auto service = std::make_unique<InferenceService>(std::move(*config), backends_, guard_);
    service->LoadStartupModels();
    return service;
  }
  void Rewrite(const std::string& yaml) { dir_.Write("models.yaml", yaml); }
  Result<ReloadReport> Reload(InferenceService& service) {
    return Wait([&](auto done) { service.Reload(std::move(done)); });
  }

  testing::TempDir dir_;
};

constexpr const char* kOne = R"(models:
  - name: a
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}]}
  - name: b
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}]}
)";

TEST_F(ReloadTest, AddsRemovesAndReloadsChangedModels) {
  auto service = StartFile(kOne);
  Rewrite(R"(models:
  - name: a
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}], latency_ms: 1}
  - name: c
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}]}
)");
  auto report = Reload(*service);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->added, std::vector<std::string>{"c v1"});
  EXPECT_EQ(report->reloaded, std::vector<std::string>{"a v1"});
  EXPECT_EQ(report->retired, std::vector<std::string>{"b v1"});
  EXPECT_TRUE(Infer(*service, Ints("c", {1})).ok());
  EXPECT_TRUE(Infer(*service, Ints("a", {1})).ok());
  EXPECT_EQ(Infer(*service, Ints("b", {1})).status().ToString(), "NotFound: unknown model 'b'");
  EXPECT_EQ(service->GetModel("a")->config.params.value()["latency_ms"], 1);
  // The same file again changes nothing.
  report = Reload(*service);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->unchanged, 2);
  EXPECT_TRUE(report->added.empty() && report->reloaded.empty() && report->retired.empty());
}

TEST_F(ReloadTest, ChangingOnlyLabelsAndCanaryReroutesWithoutReloading) {
  auto service = StartFile(kVersioned);
  std::string yaml = kVersioned;
  yaml.replace(yaml.find("stable: 1"), 9, "stable: 2");
  yaml.replace(yaml.find("weight: 0.1"), 11, "weight: 0.0");
  Rewrite(yaml);
  auto report = Reload(*service);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->rerouted, std::vector<std::string>{"m"});
  EXPECT_EQ(report->unchanged, 2);
  EXPECT_TRUE(report->reloaded.empty());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Infer(*service, Ints("m", {i}))->model_version, 2);
  EXPECT_EQ(service->GetModel("m")->labels.at("stable"), 2);
}

TEST_F(ReloadTest, ABrokenFileIsRejectedWithEveryErrorAndTheOldSetServes) {
  auto service = StartFile(kOne);
  Rewrite(R"(models:
  - name: a
    backend: identity
    thread_num: 0
  - name: b
    backend: identitty
)");
  auto report = Reload(*service);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kInvalidArgument);
  const std::string message(report.status().message());
  EXPECT_THAT(message, HasSubstr("2 configuration errors"));
  EXPECT_THAT(message, HasSubstr("models.yaml:4:17: models[0].thread_num"));
  EXPECT_THAT(message, HasSubstr("models.yaml:6:14: models[1].backend"));
  EXPECT_TRUE(Infer(*service, Ints("a", {1})).ok());
  EXPECT_TRUE(Infer(*service, Ints("b", {1})).ok());
  EXPECT_TRUE(service->Ready());
}

TEST_F(ReloadTest, AVersionSwapUnderContinuousTrafficFailsNothing) {
  const std::string v1 = R"(models:
  - name: m
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}], latency_ms: 2}
    thread_num: 2
    versions: [1]
)";
  auto service = StartFile(v1);
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0}, served_v1{0}, served_v2{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        auto r = Infer(*service, Ints("m", {1, 2}));
        if (!r.ok()) {
          ++failed;
          ADD_FAILURE() << r.status().ToString();
        } else {
          ++(r->model_version == 1 ? served_v1 : served_v2);
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Rewrite(R"(models:
  - name: m
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}], latency_ms: 2}
    thread_num: 2
    versions: [2]
)");
  auto report = Reload(*service);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->added, std::vector<std::string>{"m v2"});
  EXPECT_EQ(report->retired, std::vector<std::string>{"m v1"});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(served_v1, 0);
  EXPECT_GT(served_v2, 0);
  EXPECT_EQ(Infer(*service, Ints("m", {1}))->model_version, 2);
  // The retired version unloads once its requests are done.
  for (int i = 0; i < 100 && service->ListModels().size() != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(service->ListModels().size(), 1u);
}

// A request parked on a version that a reload retires goes through the routing again, not
// through the front door a second time: one access line, answered by the new version — or,
// when it named the retired version, the 404 a request arriving now would get.
TEST_F(ReloadTest, ARequestRoutedAnewAfterARetirementIsLoggedOnce) {
  std::ostringstream access;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(access);
  AccessLogger().sinks().push_back(sink);
  ConfigureLogging("info", LogFormat::kText, true);
  auto service = StartFile(R"(models:
  - name: m
    backend: identity
    load: on_demand
    versions: [1]
    params: {tensors: [{datatype: INT32, shape: [-1]}]}
)");
  Rewrite(R"(models:
  - name: m
    backend: identity
    versions: [2]
    params: {tensors: [{datatype: INT32, shape: [-1]}], load_ms: 1500}
)");
  // The reload loads version 2 on the loader thread; a request meanwhile parks on version 1,
  // whose own load queues behind the reload and is called off when the reload retires it.
  std::promise<Result<ReloadReport>> reloaded;
  service->Reload([&](const Result<ReloadReport>& r) { reloaded.set_value(r); });
  auto r = Ints("m", {7});
  r->id = "parked-once";
  auto answer = Submit(*service, std::move(r));
  auto named = Ints("m", {8});  // asks for version 1 by name: it is gone after the reload
  named->model_version = 1;
  auto named_answer = Submit(*service, std::move(named));
  const Result<ReloadReport> report = reloaded.get_future().get();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Result<InferResponse> result = answer.get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->model_version, 2);
  const Result<InferResponse> named_result = named_answer.get();
  EXPECT_EQ(named_result.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(named_result.status().message(), HasSubstr("has no version 1 (it serves 2)"));
  bool parked_on_v1 = false;
  for (const Event& e : service->events().Since(0)) {
    parked_on_v1 |= e.model == "m" && e.version == 1 && e.kind == "loading";
  }
  EXPECT_TRUE(parked_on_v1) << "the request reached version 1 before the reload published";
  auto& sinks = AccessLogger().sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  ConfigureLogging("info");
  const std::string lines = access.str();
  size_t count = 0;
  for (size_t at = lines.find("id=parked-once"); at != std::string::npos;
       at = lines.find("id=parked-once", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << lines;
}

TEST_F(ReloadTest, AFailedNewVersionLeavesTheOldOneServing) {
  auto service = StartFile(kOne);
  Rewrite(R"(models:
  - name: a
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}], memory_mb: 100000}
  - name: b
    backend: identity
    params: {tensors: [{datatype: INT32, shape: [-1]}]}
global: {memory_pool: 512}
)");
  auto report = Reload(*service);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->kept.size(), 1u);
  EXPECT_THAT(report->kept[0], HasSubstr("a (version 1 failed to load: not enough memory"));
  EXPECT_EQ(report->restart, std::vector<std::string>{"global.memory_pool"});
  EXPECT_TRUE(Infer(*service, Ints("a", {1})).ok());
  EXPECT_TRUE(service->Ready());
}

// `serve --port 9000` with MMSERVE_API_KEY set: a reload of the unchanged file neither undoes
// them nor reports them as needing a restart; a change of the file's own settings still is.
TEST_F(ReloadTest, SettingsFromTheCommandLineSurviveAReloadUnreported) {
  const auto file = dir_.Write("models.yaml", kOne);
  auto config = LoadConfigFile(file, backends_);
  ASSERT_TRUE(config.ok());
  config->overrides = [](GlobalConfig& g) {
    g.port = 9000;
    g.api_key = "from-the-environment";
  };
  config->overrides(config->global);
  InferenceService service(std::move(*config), backends_, guard_);
  service.LoadStartupModels();
  auto report = Reload(service);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_THAT(report->restart, ::testing::IsEmpty());
  Rewrite(std::string(kOne) + "global: {port: 7000, max_connections: 10}\n");
  report = Reload(service);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // The file's port is overridden, so only its max_connections waits for a restart.
  EXPECT_EQ(report->restart, std::vector<std::string>{"global.max_connections"});
}

TEST_F(ReloadTest, RepositoryUnloadKeepsAModelDownUntilItIsLoaded) {
  auto service = StartFile(kOne);
  auto unloaded = Wait([&](auto done) { service->UnloadModel("a", std::move(done)); });
  ASSERT_TRUE(unloaded.ok()) << unloaded.status().ToString();
  auto refused = Infer(*service, Ints("a", {1}));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("unloaded through the repository"));
  EXPECT_EQ(service->GetModel("a")->state, ModelState::kUnavailable);
  EXPECT_TRUE(service->Ready());
  auto loaded = Wait([&](auto done) { service->LoadModel("a", std::nullopt, std::move(done)); });
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(Infer(*service, Ints("a", {1})).ok());
  EXPECT_EQ(Wait([&](auto done) { service->LoadModel("zz", std::nullopt, std::move(done)); })
                .status()
                .code(),
            StatusCode::kNotFound);
}

TEST_F(ReloadTest, RepositoryLoadAddsAModelAndKeepsItsFilesInsideTheRoots) {
  auto service = StartFile(kOne);
  auto added = Wait([&](auto done) {
    service->LoadModel("extra",
                       nlohmann::json::parse(R"({"backend": "identity",
                           "params": {"tensors": [{"datatype": "INT32", "shape": [-1]}]}})"),
                       std::move(done));
  });
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(added->added, std::vector<std::string>{"extra v1"});
  EXPECT_TRUE(Infer(*service, Ints("extra", {1})).ok());
  // A reload of the file keeps what the API added.
  ASSERT_TRUE(Reload(*service).ok());
  EXPECT_TRUE(Infer(*service, Ints("extra", {1})).ok());

  auto outside = Wait([&](auto done) {
    service->LoadModel("llm", nlohmann::json{{"path", "/etc/passwd"}, {"backend", "llama"}},
                       std::move(done));
  });
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(std::string(outside.status().message()),
              HasSubstr("parameters.config.path: expected a file inside the model roots"));
  auto bad = Wait([&](auto done) {
    service->LoadModel("x", nlohmann::json{{"backend", "identity"}, {"thread_num", "two"}},
                       std::move(done));
  });
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("config.thread_num: expected an integer"));
}

}  // namespace
}  // namespace mmserve
