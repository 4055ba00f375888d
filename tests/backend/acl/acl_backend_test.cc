// The AscendCL backend through the real service and scheduler, against the simulated
// libascendcl (sim/ascendcl): two OM models on one device, compiled gears, buffers allocated at
// load only, contexts per worker thread, SoC checks, device OOM, a hung stream, pool memory,
// someone else's aclInit, and the documented teardown order — each asserted from the
// simulator's call record.
#include "backend/acl/acl_backend.h"

#include <cstring>
#include <future>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/identity/identity_backend.h"
#include "config/config_parser.h"
#include "runtime/host_runtime.h"
#include "service/inference_service.h"
#include "testing/acl_sim.h"
#include "testing/service_util.h"

namespace mmserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::AclSim;
using testing::RecordField;
using testing::Submit;

constexpr size_t kMiB = 1 << 20;

// out k, row b, element j = scale * x[b][j mod row] + bias + k (sim/ascendcl/aclsim.h)
json Detector(double scale = 2.0) {
  return {{"soc_version", "Ascend310P3"},
          {"inputs", {{{"name", "x"}, {"datatype", "FLOAT"}, {"dims", {-1, 4}}}}},
          {"outputs", {{{"name", "y"}, {"datatype", "FLOAT"}, {"dims", {-1, 4}}},
                       {{"name", "z"}, {"datatype", "FLOAT"}, {"dims", {-1, 2}}}}},
          {"dynamic_batch", {1, 2, 4, 8}},
          {"work_size", 1 * kMiB},
          {"weight_size", 4 * kMiB},
          {"scale", scale},
          {"bias", 1.0},
          {"latency_us", 3000},
          {"hang_on", 666.0}};
}

json Classifier() {  // a static batch of 2, uint8 in, float out
  return {{"soc_version", "Ascend310P3"},
          {"inputs", {{{"name", "img"}, {"datatype", "UINT8"}, {"dims", {2, 3}}}}},
          {"outputs", {{{"name", "p"}, {"datatype", "FLOAT"}, {"dims", {2, 3}}}}},
          {"work_size", 2 * kMiB},
          {"weight_size", 8 * kMiB},
          {"scale", 0.5},
          {"bias", 0.0},
          {"latency_us", 1000}};
}

class AclBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { UseRuntime({testing::AclSimLibrary()}); }

  void UseRuntime(std::vector<std::string> candidates) {
    backends_ = std::make_unique<BackendRegistry>();
    acl_ = std::make_unique<AclRuntime>(std::move(candidates));
    backends_->Register(std::make_unique<AclBackend>(*acl_));
    backends_->Register(std::make_unique<IdentityBackend>(host_));
  }

  std::string Om(const std::string& name, const json& spec) {
    return testing::WriteOm(dir_, name, spec).string();
  }

  std::unique_ptr<InferenceService> Start(const std::string& yaml) {
    auto config = ParseConfig(yaml, (dir_.path() / "models.yaml").string(), *backends_);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    if (!config.ok()) return nullptr;
    auto service = std::make_unique<InferenceService>(std::move(*config), *backends_, *guard_);
    service->LoadStartupModels();
    return service;
  }

  static std::unique_ptr<InferRequest> Rows(const std::string& model, const std::string& input,
                                            const std::vector<float>& values, int64_t cols) {
    auto r = std::make_unique<InferRequest>();
    r->model_name = model;
    r->inputs.emplace_back(input, DataType::kFp32,
                           Shape{static_cast<int64_t>(values.size()) / cols, cols},
                           std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    return r;
  }
  static std::unique_ptr<InferRequest> Bytes(const std::string& model, std::vector<uint8_t> v) {
    auto r = std::make_unique<InferRequest>();
    r->model_name = model;
    r->inputs.emplace_back("img", DataType::kUint8, Shape{static_cast<int64_t>(v.size()) / 3, 3},
                           std::string(v.begin(), v.end()));
    return r;
  }
  static std::vector<float> Floats(const Tensor& t) {
    std::vector<float> v(t.size_bytes() / 4);
    std::memcpy(v.data(), t.data().data(), t.size_bytes());
    return v;
  }
  // warmup: 0, so that the executions the tests count are their requests' (the warm-up has
  // its own test in tests/integration/acl_test.cc).
  std::string TwoModels(const std::string& extra_det = "") {
    return "models:\n"
           "  - name: det\n    path: " + Om("det.om", Detector()) + "\n"
           "    thread_num: 2\n    max_queue_delay_ms: 20\n    warmup: 0\n" + extra_det +
           "  - name: cls\n    path: " + Om("cls.om", Classifier()) + "\n    warmup: 0\n";
  }

  AclSim sim_ = AclSim::Reset();
  HostRuntime host_;
  std::unique_ptr<AclRuntime> acl_;
  std::unique_ptr<BackendRegistry> backends_;
  std::unique_ptr<RuntimeGuard> guard_ = std::make_unique<RuntimeGuard>();
  testing::TempDir dir_;
};

TEST_F(AclBackendTest, TwoModelsServeConcurrentlyAtTheirGearsWithBuffersFromLoadOnly) {
  auto service = Start(TwoModels());
  ASSERT_TRUE(service->Ready());
  auto det = service->GetModel("det");
  EXPECT_EQ(det->signature.platform, "ascend_om");
  EXPECT_EQ(det->signature.inputs[0].shape, (Shape{-1, 4}));
  EXPECT_EQ(det->signature.outputs[1].shape, (Shape{-1, 2}));
  const size_t allocations_at_load =
      sim_.Calls("aclrtMalloc").size() + sim_.Calls("aclrtMallocHost").size();

  std::vector<std::future<Result<InferResponse>>> dets, clss;
  for (int i = 0; i < 40; ++i) {
    const float v = static_cast<float>(i);
    dets.push_back(Submit(*service, Rows("det", "x", {v, v + 1, v + 2, v + 3}, 4)));
    if (i % 2 == 0) clss.push_back(Submit(*service, Bytes("cls", {uint8_t(i), 2, 4})));
  }
  for (int i = 0; i < 40; ++i) {
    auto r = dets[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->outputs.size(), 2u);
    EXPECT_EQ(r->outputs[0].shape(), (Shape{1, 4}));
    EXPECT_EQ(r->outputs[1].shape(), (Shape{1, 2}));
    const float v = static_cast<float>(i);
    EXPECT_EQ(Floats(r->outputs[0]), (std::vector<float>{2 * v + 1, 2 * v + 3, 2 * v + 5, 2 * v + 7}));
    EXPECT_EQ(Floats(r->outputs[1]), (std::vector<float>{2 * v + 2, 2 * v + 4}));  // + k = 1
  }
  for (size_t i = 0; i < clss.size(); ++i) {
    auto r = clss[i].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Floats(r->outputs[0]), (std::vector<float>{float(2 * i) * 0.5f, 1, 2}));
  }
  // No buffer was allocated for any request.
  EXPECT_EQ(sim_.Calls("aclrtMalloc").size() + sim_.Calls("aclrtMallocHost").size(),
            allocations_at_load);

  // Which model id runs in which context: each instance loaded its own, in its own context.
  std::map<std::string, std::string> context_of;  // model id → ctx
  std::set<std::string> threads, classifier;
  for (const auto& line : sim_.Calls("aclmdlLoadFromFile")) {
    context_of[RecordField(line, "model")] = RecordField(line, "ctx");
    threads.insert(RecordField(line, "tid"));
    if (RecordField(line, "path").ends_with("cls.om")) classifier.insert(RecordField(line, "model"));
  }
  ASSERT_EQ(context_of.size(), 3u) << "det x 2 workers + cls";
  EXPECT_EQ(threads.size(), 3u) << "each load on its own worker thread";
  std::set<std::string> contexts;
  for (const auto& [id, ctx] : context_of) contexts.insert(ctx);
  EXPECT_EQ(contexts.size(), 3u) << "no two instances share a context";

  // Every execution ran at a compiled gear, selected right before it on the same thread.
  std::map<std::string, std::string> gear_by_thread;
  int batched = 0, det_runs = 0, cls_runs = 0;
  for (const auto& line : sim_.Record()) {
    if (line.rfind("aclmdlSetDynamicBatchSize ", 0) == 0) gear_by_thread[RecordField(line, "tid")] = RecordField(line, "batch");
    if (line.rfind("aclmdlExecuteAsync ", 0) != 0) continue;
    const std::string model = RecordField(line, "model");
    EXPECT_EQ(RecordField(line, "ctx"), context_of[model]) << line;
    const int batch = std::stoi(RecordField(line, "batch"));
    if (classifier.count(model)) {
      ++cls_runs;
      EXPECT_EQ(batch, 2) << "the classifier's static batch: " << line;
      continue;
    }
    ++det_runs;
    EXPECT_THAT((std::vector<int>{1, 2, 4, 8}), ::testing::Contains(batch)) << line;
    EXPECT_EQ(gear_by_thread[RecordField(line, "tid")], std::to_string(batch)) << line;
    gear_by_thread.erase(RecordField(line, "tid"));
    if (batch > 1) ++batched;
  }
  EXPECT_EQ(cls_runs + det_runs, static_cast<int>(sim_.Calls("aclmdlExecuteAsync").size()));
  EXPECT_GT(batched, 0) << "concurrent requests were batched";
  EXPECT_LT(det_runs, 40);
  auto counters = service->GetModel("det")->counters;
  EXPECT_EQ(counters["rows"], 40);
  EXPECT_EQ(counters["executions"], det_runs);
}

// serial_device: the simulated card runs one execution at a time whatever the stream, so the
// OM's latency is a cost model a benchmark can hold the batcher to (bench/batching.sh).
TEST_F(AclBackendTest, ASerialDeviceRunsOneExecutionAtATimeAcrossStreams) {
  sim_ = AclSim::Reset(R"({"serial_device": true})");
  json spec = Classifier();
  spec["latency_us"] = 100'000;
  auto service = Start("models:\n  - name: cls\n    path: " + Om("cls.om", spec) +
                       "\n    thread_num: 2\n    max_batch: 1\n    warmup: 0\n");
  ASSERT_TRUE(service->Ready());
  const auto start = std::chrono::steady_clock::now();
  auto a = Submit(*service, Bytes("cls", {1, 2, 3}));
  auto b = Submit(*service, Bytes("cls", {4, 5, 6}));
  ASSERT_TRUE(a.get().ok());
  ASSERT_TRUE(b.get().ok());
  // Two workers, two streams, and still one after the other.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  const auto executions = sim_.Calls("aclmdlExecuteAsync");
  ASSERT_EQ(executions.size(), 2u);
  EXPECT_NE(RecordField(executions[0], "stream"), RecordField(executions[1], "stream"));
}

TEST_F(AclBackendTest, DynamicBatchFalseBatchesNoFurtherThanBatchSize) {
  // A dynamic OM (gears 1..8), one worker, requests queued together: batches stop at 2.
  auto service = Start("models:\n  - name: det\n    path: " + Om("det.om", Detector()) +
                       "\n    batch_size: 2\n    dynamic_batch: false\n    warmup: 0\n"
                       "    max_queue_delay_ms: 50\n");
  std::vector<std::future<Result<InferResponse>>> results;
  for (int i = 0; i < 8; ++i) results.push_back(Submit(*service, Rows("det", "x", {1, 2, 3, 4}, 4)));
  for (auto& r : results) ASSERT_TRUE(r.get().ok());
  auto counters = service->GetModel("det")->counters;
  EXPECT_EQ(counters["rows"], 8);
  EXPECT_EQ(counters["gear_4"] + counters["gear_8"], 0) << "no batch beyond batch_size";
  EXPECT_GT(counters["gear_2"], 0) << "but batches of 2";
}

TEST_F(AclBackendTest, ARequestMayCarrySeveralRowsUpToTheLargestGear) {
  auto service = Start(TwoModels());
  auto three = Submit(*service, Rows("det", "x", std::vector<float>(12, 1.0f), 4)).get();
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->outputs[0].shape(), (Shape{3, 4}));
  EXPECT_EQ(Floats(three->outputs[0]), std::vector<float>(12, 3.0f));
  auto counters = service->GetModel("det")->counters;
  EXPECT_EQ(counters["gear_4"], 1) << "3 rows run at gear 4";
  EXPECT_EQ(counters["padded_rows"], 1);

  auto nine = Submit(*service, Rows("det", "x", std::vector<float>(36, 1.0f), 4)).get();
  EXPECT_EQ(nine.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(nine.status().message(), HasSubstr("may carry 1..8 rows"));
  auto wrong = Submit(*service, Rows("det", "x", {1, 2, 3}, 3)).get();
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument) << "shape [1,3] against [-1,4]";
}

TEST_F(AclBackendTest, TheEstimateIsQuerySizeAndTheFootprintIsWhatTheDeviceHolds) {
  auto service = Start(TwoModels() + "  - name: pooled\n    path: " + Om("pooled.om", Classifier()) +
                       "\n    thread_num: 2\n    params: {memory: pool}\n");
  auto det = service->GetModel("det");
  EXPECT_EQ(det->estimate.bytes, static_cast<int64_t>(2 * (1 + 4) * kMiB));
  EXPECT_THAT(det->estimate.source, HasSubstr("aclmdlQuerySize: 2 x (work 1 MiB + weight 4 MiB)"));
  auto pooled = service->GetModel("pooled");
  ASSERT_EQ(pooled->state, ModelState::kReady) << pooled->reason;
  EXPECT_EQ(pooled->estimate.bytes, static_cast<int64_t>((8 + 2 * 2) * kMiB)) << "weights once";
  // The weights are allocated once and shared by both loads.
  int weight_allocations = 0;
  for (const auto& line : sim_.Calls("aclrtMalloc")) {
    if (RecordField(line, "size") == std::to_string(8 * kMiB)) ++weight_allocations;
  }
  EXPECT_EQ(weight_allocations, 1);
  EXPECT_EQ(sim_.Calls("aclmdlLoadFromFileWithMem").size(), 2u);
  int64_t resident = 0;
  for (const auto& m : service->ListModels()) resident += m.resident_bytes;
  EXPECT_EQ(resident, static_cast<int64_t>(sim_.DeviceUsed(0)))
      << "the footprint is the device memory, buffers included";
  EXPECT_GT(resident, static_cast<int64_t>((2 * 5 + 10 + 12) * kMiB));
}

TEST_F(AclBackendTest, TheBudgetFollowsWhatTheDeviceGaveNotWhatQuerySizeSaid) {
  sim_ = AclSim::Reset(R"({"load_charge": 1.5})");  // each load takes 1.5 x what it says
  auto service = Start(TwoModels());
  ASSERT_TRUE(service->Ready());
  int64_t resident = 0, estimated = 0;
  for (const auto& m : service->ListModels()) {
    resident += m.resident_bytes;
    estimated += m.estimate.bytes;
  }
  EXPECT_EQ(resident, static_cast<int64_t>(sim_.DeviceUsed(0)));
  EXPECT_GT(resident, estimated * 5 / 4) << "the loads' real cost, buffers included";
}

TEST_F(AclBackendTest, ASocMismatchIsNamedBeforeAnythingLoads) {
  json other = Detector();
  other["soc_version"] = "Ascend910B3";
  const std::string declared = Om("declared.om", other);
  const std::string sidecar = Om("sidecar.om", other);
  dir_.Write("sidecar.soc_version", "Ascend910B3\n");
  const std::string silent = Om("silent.om", other);
  // Declared (params or sidecar): the config is refused before anything loads.
  const std::string yaml = TwoModels() +
                           "  - name: declared\n    path: " + declared +
                           "\n    params: {soc_version: Ascend910B3}\n"
                           "  - name: sidecar\n    path: " + sidecar + "\n";
  auto config = ParseConfig(yaml, (dir_.path() / "models.yaml").string(), *backends_);
  ASSERT_FALSE(config.ok());
  const std::string errors(config.status().message());
  EXPECT_THAT(errors, HasSubstr("models[2].params.soc_version: expected an OM compiled for this "
                                "device's SoC, found model 'declared' was compiled for SoC "
                                "Ascend910B3 (params.soc_version) but this device is "
                                "Ascend310P3"));
  EXPECT_THAT(errors, HasSubstr("models[3].path: expected an OM compiled for this device's SoC"));
  EXPECT_TRUE(sim_.Calls("aclmdlLoadFromFile").empty());
  // Undeclared: the load itself fails, and the message still names both.
  auto service = Start(TwoModels() + "  - name: silent\n    path: " + silent + "\n");
  auto m = service->GetModel("silent");
  EXPECT_EQ(m->state, ModelState::kUnavailable);
  EXPECT_THAT(m->reason, HasSubstr("507008 ACL_ERROR_RT_SOC_VERSION"));
  EXPECT_THAT(m->reason, HasSubstr("supported socVersion=Ascend310P3, but the model socVersion=Ascend910B3"));
  auto ok = Submit(*service, Rows("det", "x", {1, 2, 3, 4}, 4)).get();
  EXPECT_TRUE(ok.ok()) << "the others serve";
}

TEST_F(AclBackendTest, DeviceOomAtLoadTakesThatModelOutAndTheOthersServe) {
  sim_ = AclSim::Reset(R"({"memory_mb": 64})");
  json big = Classifier();
  big["weight_size"] = 100 * kMiB;
  // The budget claims more than the card has, so the load itself meets the OOM.
  auto service = Start("global: {memory_pool: 1024}\n" + TwoModels() +
                       "  - name: big\n    path: " + Om("big.om", big) + "\n");
  auto m = service->GetModel("big");
  EXPECT_EQ(m->state, ModelState::kUnavailable);
  EXPECT_THAT(m->reason, HasSubstr("aclmdlLoadFromFile returned 207001 ACL_ERROR_RT_MEMORY_ALLOCATION"));
  EXPECT_THAT(m->reason, HasSubstr("EL0004"));
  EXPECT_TRUE(Submit(*service, Rows("det", "x", {1, 2, 3, 4}, 4)).get().ok());
  EXPECT_TRUE(Submit(*service, Bytes("cls", {1, 2, 3})).get().ok());
  auto failed = Submit(*service, Bytes("big", {1, 2, 3})).get();
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
}

TEST_F(AclBackendTest, AHungStreamIs504AndTheInstanceIsRebuiltWhileTheOtherModelServes) {
  auto service = Start(TwoModels("    timeout_ms: 200\n    watchdog_margin_ms: 100\n"
                                 "    breaker: {failures: 5, cooldown_ms: 60000}\n"));
  auto hung = Submit(*service, Rows("det", "x", {666, 0, 0, 0}, 4));
  for (int i = 0; i < 10; ++i) {
    auto r = Submit(*service, Bytes("cls", {1, 2, 3})).get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  auto r = hung.get();
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("ran past the request's 200 ms deadline"));
  // The watchdog reports the hang at deadline + margin and opens the breaker.
  for (int i = 0; i < 100 && service->GetModel("det")->stats->watchdog_reports == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto det = service->GetModel("det");
  ASSERT_TRUE(det->stats.has_value());
  EXPECT_EQ(det->stats->watchdog_reports, 1);
  EXPECT_EQ(det->stats->breaker, CircuitBreaker::State::kOpen);
  EXPECT_THAT(det->stats->breaker_reason, HasSubstr("stage execute"));
  // The worker abandoned the stream and built a fresh instance on the same thread.
  std::string hung_tid;
  for (const auto& line : sim_.Calls("aclmdlExecuteAsync")) {
    if (line.find("hang=1") != std::string::npos) hung_tid = RecordField(line, "tid");
  }
  ASSERT_FALSE(hung_tid.empty());
  for (int i = 0; i < 100; ++i) {  // the restart follows the report
    bool rebuilt = false;
    bool hung_seen = false, destroyed = false;
    for (const auto& line : sim_.Record()) {
      if (RecordField(line, "tid") != hung_tid) continue;
      if (line.find("hang=1") != std::string::npos) hung_seen = true;
      if (hung_seen && line.rfind("aclrtDestroyContext", 0) == 0) destroyed = true;
      if (destroyed && line.rfind("aclrtCreateContext", 0) == 0) rebuilt = true;
    }
    if (rebuilt) break;
    ASSERT_LT(i, 99) << "no rebuilt instance on thread " << hung_tid;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST_F(AclBackendTest, WithoutGetDescFromFileTheDescriptionComesFromAScratchLoad) {
  sim_ = AclSim::Reset(R"({"desc_from_file": false})");
  auto service = Start(TwoModels());
  ASSERT_TRUE(service->Ready()) << service->GetModel("det")->reason;
  EXPECT_THAT(sim_.Calls("aclmdlGetDescFromFile")[0], HasSubstr("-> 200001"));
  EXPECT_TRUE(Submit(*service, Rows("det", "x", {1, 2, 3, 4}, 4)).get().ok());
  service.reset();
  int contexts = 0;
  EXPECT_EQ(testing::CheckTeardownOrder(sim_.Record(), &contexts), "");
  EXPECT_EQ(contexts, 3) << "the scratch contexts are not instances";
}

TEST_F(AclBackendTest, TeardownFollowsTheDocumentedOrderAndFinalizesLast) {
  auto service = Start(TwoModels());
  EXPECT_TRUE(Submit(*service, Rows("det", "x", {1, 2, 3, 4}, 4)).get().ok());
  EXPECT_TRUE(Submit(*service, Bytes("cls", {1, 2, 3})).get().ok());
  service->Shutdown(std::chrono::milliseconds(1000));
  service.reset();
  // AscendCL stays initialized until the guard goes (it cannot be initialized again).
  EXPECT_EQ(guard_->Describe(), "acl(owned)");
  guard_.reset();
  const auto record = sim_.Record();
  int contexts = 0;
  EXPECT_EQ(testing::CheckTeardownOrder(record, &contexts), "");
  EXPECT_EQ(contexts, 3);
  ASSERT_FALSE(record.empty());
  EXPECT_THAT(record.back(), StartsWith("aclFinalizeReference refcount=0"));
  EXPECT_EQ(sim_.DeviceUsed(0), 0u) << "everything allocated was freed";
}

TEST_F(AclBackendTest, SomeoneElsesAclInitDoesNotStopUsAndWeNeverFinalize) {
  auto acl_init = reinterpret_cast<int (*)(const char*)>(sim_.Symbol("aclInit"));
  ASSERT_EQ(acl_init(nullptr), 0);
  auto service = Start(TwoModels());
  ASSERT_TRUE(service->Ready()) << service->GetModel("det")->reason;
  EXPECT_TRUE(Submit(*service, Rows("det", "x", {1, 2, 3, 4}, 4)).get().ok());
  service.reset();
  const auto record = sim_.Record();
  EXPECT_THAT(record[1], AllOf(StartsWith("aclInit"), HasSubstr("-> 100002")));
  for (const auto& line : record) EXPECT_THAT(line, ::testing::Not(StartsWith("aclFinalize")));
  EXPECT_EQ(testing::CheckTeardownOrder(record), "");
}

TEST_F(AclBackendTest, WithoutAscendClItsModelsAreUnavailableAndTheRestServes) {
  UseRuntime({"/nonexistent/libascendcl.so"});
  auto service = Start("models:\n  - name: det\n    path: " + Om("det.om", Detector()) +
                       "\n  - name: echo\n    backend: identity\n");
  auto det = service->GetModel("det");
  EXPECT_EQ(det->state, ModelState::kUnavailable);
  EXPECT_THAT(det->reason, HasSubstr("AscendCL not found"));
  auto echo = std::make_unique<InferRequest>();
  echo->model_name = "echo";
  echo->inputs.emplace_back("INPUT0", DataType::kFp32, Shape{1}, std::string(4, '\0'));
  EXPECT_TRUE(Submit(*service, std::move(echo)).get().ok());
}

TEST_F(AclBackendTest, WrongParamsAreConfigErrorsNamingTheField) {
  const std::string yaml = "models:\n  - name: det\n    path: " + Om("det.om", Detector()) +
                           "\n    params: {memory: shared, sync_timeout_ms: -1, soc: x}\n";
  auto config = ParseConfig(yaml, (dir_.path() / "models.yaml").string(), *backends_);
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("models[0].params.memory"));
  EXPECT_THAT(message, HasSubstr("independent"));
  EXPECT_THAT(message, HasSubstr("models[0].params.sync_timeout_ms"));
  EXPECT_THAT(message, HasSubstr("models[0].params.soc"));
}

}  // namespace
}  // namespace mmserve
