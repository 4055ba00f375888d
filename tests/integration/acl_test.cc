// The AscendCL backend through the real binary on 127.0.0.1, with the simulated libascendcl
// found where CANN's would be (ASCEND_HOME_PATH) and its call record in a trace file: two OM
// models serving concurrent HTTP clients, a hung stream fenced off while the other model serves,
// a SoC mismatch in the metadata, preflight from aclmdlQuerySize, the teardown order on SIGTERM,
// and `mmserve doctor` with and without AscendCL.
#include <signal.h>
#include <stdlib.h>

#include <future>
#include <map>
#include <set>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/acl_sim.h"
#include "testing/http_client.h"
#include "testing/paths.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::HttpClient;
using testing::HttpResult;
using testing::ServerProcess;

constexpr size_t kMiB = 1 << 20;

bool HasSubstrIn(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

json Detector(bool hangs = false) {
  json om = {{"soc_version", "Ascend310P3"},
             {"inputs", {{{"name", "x"}, {"datatype", "FLOAT"}, {"dims", {-1, 4}}}}},
             {"outputs", {{{"name", "y"}, {"datatype", "FLOAT"}, {"dims", {-1, 4}}}}},
             {"dynamic_batch", {1, 2, 4, 8}},
             {"work_size", 1 * kMiB},
             {"weight_size", 4 * kMiB},
             {"scale", 2.0},
             {"bias", 1.0},
             {"latency_us", 2000}};
  if (hangs) om["hang_on"] = 666.0;
  return om;
}

json Classifier(const std::string& soc = "Ascend310P3") {
  return {{"soc_version", soc},
          {"inputs", {{{"name", "img"}, {"datatype", "UINT8"}, {"dims", {2, 3}}}}},
          {"outputs", {{{"name", "p"}, {"datatype", "FLOAT"}, {"dims", {2, 3}}}}},
          {"work_size", 2 * kMiB},
          {"weight_size", 8 * kMiB},
          {"scale", 0.5},
          {"latency_us", 1000}};
}

std::string DetBody(float v, int rows = 1) {
  std::vector<float> data;
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < 4; ++j) data.push_back(v + static_cast<float>(j));
  }
  return json{{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {rows, 4}}, {"data", data}}}}}.dump();
}

std::string ClsBody(int a) {
  return json{{"inputs", {{{"name", "img"}, {"datatype", "UINT8"}, {"shape", {1, 3}}, {"data", {a, 2, 4}}}}}}.dump();
}

// Writes the OM files and a config serving them into `dir`; returns the config's path.
std::string WriteConfig(const testing::TempDir& dir, const std::string& extra = "") {
  testing::WriteOm(dir, "det.om", Detector());
  testing::WriteOm(dir, "guarded.om", Detector(/*hangs=*/true));
  testing::WriteOm(dir, "cls.om", Classifier());
  testing::WriteOm(dir, "foreign.om", Classifier("Ascend910B3"));
  json failing = Detector();
  failing["fail_on"] = {{"value", 207.0}, {"code", 207001}};
  testing::WriteOm(dir, "oom.om", failing);
  failing["fail_on"] = {{"value", 507.0}, {"code", 507011}};
  testing::WriteOm(dir, "faulty.om", failing);
  return dir.Write("models.yaml", R"(global:
  thread_num: 4
models:
  - name: det               # warmup 0: the tests count their own requests' executions
    path: det.om
    thread_num: 2
    max_queue_delay_ms: 10
    warmup: 0
  - name: guarded
    path: guarded.om
    timeout_ms: 300
    watchdog_margin_ms: 200
    breaker: {failures: 3, cooldown_ms: 60000}
  - name: cls
    path: cls.om
    params: {memory: pool}
)" + extra).string();
}

class AclServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    ::setenv("ASCEND_HOME_PATH", testing::AclSimHome().c_str(), 1);
    ::setenv("ACLSIM_TRACE", (dir_->path() / "trace.txt").c_str(), 1);
    const std::string failing = R"(  - name: oom
    path: oom.om
    breaker: {failures: 2, cooldown_ms: 60000}
  - name: faulty
    path: faulty.om
)";
    server_ = new ServerProcess({"serve", WriteConfig(*dir_, failing), "--port", "0", "--lock-dir",
                                 (dir_->path() / "locks").string()},
                                dir_->path() / "server.log");
    ASSERT_TRUE(server_->Start()) << server_->Log();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
    ::unsetenv("ACLSIM_TRACE");
  }
  void SetUp() override { ASSERT_GT(server_->port(), 0) << server_->Log(); }

  static HttpResult Post(const std::string& target, const std::string& body) {
    HttpClient client(server_->port());
    return client.Post(target, body);
  }
  static json Get(const std::string& target) {
    HttpClient client(server_->port());
    auto res = client.Get(target);
    EXPECT_EQ(res.status, 200) << target << ": " << res.body;
    return json::parse(res.body);
  }

  static testing::TempDir* dir_;
  static ServerProcess* server_;
};

testing::TempDir* AclServerTest::dir_ = nullptr;
ServerProcess* AclServerTest::server_ = nullptr;

TEST_F(AclServerTest, TwoOmModelsServeConcurrentClientsAtTheirGears) {
  json meta = Get("/v2/models/det");
  EXPECT_EQ(meta["platform"], "ascend_om");
  EXPECT_EQ(meta["inputs"][0]["shape"], json({-1, 4}));
  std::vector<std::future<bool>> clients;
  for (int c = 0; c < 8; ++c) {
    clients.push_back(std::async(std::launch::async, [c] {
      HttpClient client(server_->port());
      for (int i = 0; i < 10; ++i) {
        const float v = static_cast<float>(c * 10 + i);
        auto res = client.Post("/v2/models/det/infer", DetBody(v));
        if (res.status != 200) return false;
        auto out = json::parse(res.body)["outputs"][0]["data"];
        if (out != json({2 * v + 1, 2 * v + 3, 2 * v + 5, 2 * v + 7})) return false;
        res = client.Post("/v2/models/cls/infer", ClsBody(c * 2));
        if (res.status != 200) return false;
        if (json::parse(res.body)["outputs"][0]["data"] != json({c, 1.0, 2.0})) return false;
      }
      return true;
    }));
  }
  for (auto& c : clients) EXPECT_TRUE(c.get());
  json counters = Get("/v2/models/det/stats")["model_stats"][0]["mmserve"]["counters"];
  EXPECT_EQ(counters["rows"], 80);
  EXPECT_LT(counters["executions"].get<int>(), 80) << "concurrent clients were batched: " << counters;
  int at_gears = 0;
  for (const char* gear : {"gear_1", "gear_2", "gear_4", "gear_8"}) {
    at_gears += counters.value(gear, 0);
  }
  EXPECT_EQ(at_gears, counters["executions"].get<int>()) << "only compiled gears ran";
  json cls = Get("/v2/models/cls/stats")["model_stats"][0]["mmserve"]["counters"];
  EXPECT_EQ(cls["gear_2"], cls["executions"]) << "the static batch of 2, padded";
}

TEST_F(AclServerTest, AHungStreamIs504WithOneReportWhileTheOtherModelsServe) {
  auto hung = std::async(std::launch::async, [] { return Post("/v2/models/guarded/infer", DetBody(666)); });
  HttpClient client(server_->port());
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(client.Post("/v2/models/det/infer", DetBody(1)).status, 200);
    std::this_thread::sleep_for(10ms);
  }
  HttpResult res = hung.get();
  EXPECT_EQ(res.status, 504) << res.body;
  EXPECT_THAT(res.body, HasSubstr("ran past the request's"));
  // The hang is reported at deadline + margin: quarantined, the others serving.
  for (int i = 0; i < 200; ++i) {
    if (Get("/v2/models/guarded/stats")["model_stats"][0]["mmserve"]["watchdog_reports"] == 1) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(client.Get("/v2/models/guarded/ready").status, 400);
  EXPECT_EQ(client.Post("/v2/models/guarded/infer", DetBody(1)).status, 503);
  EXPECT_EQ(client.Post("/v2/models/cls/infer", ClsBody(1)).status, 200);
  const std::string log = server_->Log();
  std::regex report("\\] watchdog: model 'guarded' version 1: an execution of a batch of 1 in "
                    "stage execute has run [0-9]+ ms");
  EXPECT_EQ(std::distance(std::sregex_iterator(log.begin(), log.end(), report), std::sregex_iterator()), 1)
      << log;
}

TEST_F(AclServerTest, ErrorsAreClassedWithAHintAndDeviceErrorsCountAsFailures) {
  HttpClient client(server_->port());
  // Device out of memory while executing: the server's trouble, 503, a breaker failure.
  HttpResult res = client.Post("/v2/models/oom/infer", DetBody(207));
  EXPECT_EQ(res.status, 503) << res.body;
  EXPECT_THAT(res.body, HasSubstr("207001 ACL_ERROR_RT_MEMORY_ALLOCATION"));
  EXPECT_THAT(res.body, HasSubstr("[device memory: the device is out of memory: lower thread_num"));
  EXPECT_EQ(client.Post("/v2/models/oom/infer", DetBody(1)).status, 200) << "a success resets";
  EXPECT_EQ(client.Post("/v2/models/oom/infer", DetBody(207)).status, 503);
  EXPECT_EQ(client.Post("/v2/models/oom/infer", DetBody(207)).status, 503);
  res = client.Post("/v2/models/oom/infer", DetBody(1));
  EXPECT_EQ(res.status, 503) << "a persistent OOM is quarantined";
  EXPECT_THAT(res.body, HasSubstr("out of service (circuit breaker open): 2 consecutive failures"));
  // A device fault is a 500 with its hint, counted as a failure, never blamed on the client.
  res = client.Post("/v2/models/faulty/infer", DetBody(507));
  EXPECT_EQ(res.status, 500) << res.body;
  EXPECT_THAT(res.body, HasSubstr("507011"));
  EXPECT_THAT(res.body, HasSubstr("[device fault: "));
  json stats = Get("/v2/models/faulty/stats")["model_stats"][0];
  EXPECT_EQ(stats["inference_stats"]["fail"]["count"], 1);
}

TEST(AclLifecycleTest, WarmUpRunsEveryGearOnEveryInstanceBeforeTheModelIsReady) {
  testing::TempDir dir;
  ::setenv("ASCEND_HOME_PATH", testing::AclSimHome().c_str(), 1);
  ::setenv("ACLSIM_TRACE", (dir.path() / "trace.txt").c_str(), 1);
  // det: gears 1, 2, 4, 8 on two workers, warmup 2; cls: the acl default (1), static batch 2;
  // guarded: warmup 0.
  testing::WriteOm(dir, "det.om", Detector());
  testing::WriteOm(dir, "cls.om", Classifier());
  const std::string config = dir.Write("models.yaml", R"(models:
  - {name: det, path: det.om, thread_num: 2, warmup: 2}
  - {name: cls, path: cls.om}
  - {name: cold, path: det.om, warmup: 0}
)").string();
  ServerProcess server({"serve", config, "--port", "0", "--lock-dir",
                        (dir.path() / "locks").string()},
                       dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  ::unsetenv("ACLSIM_TRACE");
  // Before any request: every execution in the trace is a warm-up.
  std::map<std::string, std::map<std::string, int>> runs;  // model id -> batch -> executions
  for (const auto& line : testing::ReadRecordFile(dir.path() / "trace.txt")) {
    if (line.rfind("aclmdlExecuteAsync ", 0) != 0) continue;
    ++runs[testing::RecordField(line, "model")][testing::RecordField(line, "batch")];
  }
  // Model ids: det's two loads first (1, 2), then cls (3), then cold (4), in load order.
  for (const char* id : {"1", "2"}) {
    EXPECT_EQ(runs[id], (std::map<std::string, int>{{"1", 2}, {"2", 2}, {"4", 2}, {"8", 2}}))
        << "det instance " << id;
  }
  EXPECT_EQ(runs["3"], (std::map<std::string, int>{{"2", 1}})) << "cls at its static batch";
  EXPECT_FALSE(runs.contains("4")) << "warmup: 0";
  json stats = json::parse(HttpClient(server.port()).Get("/v2/models/det/stats").body);
  EXPECT_EQ(stats["model_stats"][0]["inference_count"], 0) << "warm-ups are not inferences";
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// `isolation: process` on the simulator: the hung model's worker is killed by the watchdog (its
// device memory and stream go with it), the model serves again once the breaker's cooldown
// passes, and the in-process model beside it never stops — its answers equal the isolated
// one's, gears and all.
TEST(AclLifecycleTest, AnIsolatedHungModelIsKilledAndServesAgainWhileTheOthersServe) {
  testing::TempDir dir;
  ::setenv("ASCEND_HOME_PATH", testing::AclSimHome().c_str(), 1);
  testing::WriteOm(dir, "det.om", Detector());
  testing::WriteOm(dir, "guarded.om", Detector(/*hangs=*/true));
  const std::string config = dir.Write("models.yaml", R"(models:
  - {name: det, path: det.om}
  - {name: guarded, path: guarded.om, isolation: process, timeout_ms: 300,
     watchdog_margin_ms: 200, breaker: {cooldown_ms: 300}}
)").string();
  ServerProcess server({"serve", config, "--port", "0", "--lock-dir",
                        (dir.path() / "locks").string()},
                       dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient client(server.port());
  const HttpResult local = client.Post("/v2/models/det/infer", DetBody(1, 3));
  const HttpResult isolated = client.Post("/v2/models/guarded/infer", DetBody(1, 3));
  ASSERT_EQ(isolated.status, 200) << isolated.body;
  EXPECT_EQ(json::parse(local.body)["outputs"], json::parse(isolated.body)["outputs"]);

  auto hung = std::async(std::launch::async, [&] {
    return HttpClient(server.port()).Post("/v2/models/guarded/infer", DetBody(666));
  });
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(client.Post("/v2/models/det/infer", DetBody(1)).status, 200);
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(hung.get().status, 504);
  bool back = false;
  for (int i = 0; i < 1000 && !back; ++i) {
    back = client.Post("/v2/models/guarded/infer", DetBody(2)).status == 200;
    if (!back) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(back) << server.Log();
  EXPECT_THAT(server.Log(), HasSubstr("model worker for 'guarded' exited: SIGKILL"));
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(AclLifecycleTest, BatchingTheOmCannotDoIsRefusedBeforeAnythingLoads) {
  testing::TempDir dir;
  ::setenv("ASCEND_HOME_PATH", testing::AclSimHome().c_str(), 1);
  testing::WriteOm(dir, "det.om", Detector());    // gears 1, 2, 4, 8
  testing::WriteOm(dir, "cls.om", Classifier());  // a static batch of 2
  const std::string config = dir.Write("models.yaml", R"(models:
  - {name: det, path: det.om, batch_tiers: [1, 3]}
  - {name: cls, path: cls.om, dynamic_batch: true}
  - {name: cls4, path: cls.om, batch_size: 4}
  - {name: fine, path: det.om, batch_size: 2, dynamic_batch: false}
)").string();
  auto [code, out] = ServerProcess::Run({"validate", config});
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("model 'det' v1: batch_tiers: [1, 3], but 3 is not a gear of "
                             "'det.om' (its gears: [1, 2, 4, 8])"));
  EXPECT_THAT(out, HasSubstr("model 'cls' v1: dynamic_batch: true, but 'cls.om' is compiled for "
                             "a static batch of 2 (every execution runs 2 rows, padded)"));
  EXPECT_THAT(out, HasSubstr("model 'cls4' v1: batch_size: 4, but 'cls.om' is compiled for a "
                             "static batch of 2"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("model 'fine'")));
  std::tie(code, out) = ServerProcess::Run(
      {"serve", config, "--port", "0", "--lock-dir", (dir.path() / "locks").string()});
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("refusing to start: what the model files cannot do"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("loaded")));
}

TEST(AclLifecycleTest, ASocMismatchIsRefusedBeforeAnythingLoadsNamingBoth) {
  testing::TempDir dir;
  ::setenv("ASCEND_HOME_PATH", testing::AclSimHome().c_str(), 1);
  const std::string config = WriteConfig(dir, R"(  - name: foreign
    path: foreign.om
    params: {soc_version: Ascend910B3}
)");
  for (const std::string command : {"validate", "serve"}) {
    auto [code, out] = ServerProcess::Run({command, config, "--port", "0", "--lock-dir",
                                           (dir.path() / "locks").string()});
    if (command == "validate") {
      std::tie(code, out) = ServerProcess::Run({command, config});
    }
    EXPECT_EQ(code, command == "validate" ? 1 : 2) << out;
    EXPECT_THAT(out, HasSubstr("models[3].params.soc_version: expected an OM compiled for this "
                               "device's SoC"));
    EXPECT_THAT(out, HasSubstr("compiled for SoC Ascend910B3"));
    EXPECT_THAT(out, HasSubstr("this device is Ascend310P3"));
    EXPECT_THAT(out, ::testing::Not(HasSubstr("loaded"))) << command;
  }
}

TEST(AclLifecycleTest, SigtermTearsDownEveryModelInTheDocumentedOrderThenFinalizesOnce) {
  testing::TempDir dir;
  ::setenv("ASCEND_HOME_PATH", testing::AclSimHome().c_str(), 1);
  ::setenv("ACLSIM_TRACE", (dir.path() / "trace.txt").c_str(), 1);
  // An on-demand model that idles out, comes back, is unloaded and loaded through the
  // repository API and survives a reload: AscendCL is initialized once through all of it (the
  // simulator, like CANN, refuses aclInit after aclFinalize).
  ServerProcess server({"serve", WriteConfig(dir, R"(  - name: lazy
    path: det.om
    load: on_demand
    keep_alive: 300ms
)"), "--port", "0", "--lock-dir", (dir.path() / "locks").string()},
                       dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  {
    HttpClient client(server.port());
    EXPECT_EQ(client.Post("/v2/models/det/infer", DetBody(1, 3)).status, 200);
    EXPECT_EQ(client.Post("/v2/models/cls/infer", ClsBody(1)).status, 200);
    for (int cycle = 0; cycle < 2; ++cycle) {
      EXPECT_EQ(client.Post("/v2/models/lazy/infer", DetBody(1)).status, 200);
      for (int i = 0; i < 100 && !HasSubstrIn(client.Get("/v2/models/lazy").body, "\"UNLOADED\"");
           ++i) {
        std::this_thread::sleep_for(50ms);  // idles out after 300 ms
      }
    }
    EXPECT_EQ(client.Post("/v2/repository/models/lazy/load", "{}").status, 200);
    EXPECT_EQ(client.Post("/v2/repository/models/lazy/unload", "{}").status, 200);
    EXPECT_EQ(client.Post("/v2/repository/reload", "{}").status, 200);
    EXPECT_EQ(client.Post("/v2/repository/models/lazy/load", "{}").status, 200);
    EXPECT_EQ(client.Post("/v2/models/lazy/infer", DetBody(2)).status, 200);
  }
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
  ::unsetenv("ACLSIM_TRACE");
  const auto record = testing::ReadRecordFile(dir.path() / "trace.txt");
  ASSERT_FALSE(record.empty());
  int contexts = 0;
  EXPECT_EQ(testing::CheckTeardownOrder(record, &contexts), "");
  EXPECT_GE(contexts, 4 + 4) << "det x 2, guarded, cls, and lazy at least four times";
  int inits = 0, unloads = 0;
  for (const auto& line : record) {
    inits += line.rfind("aclInit ", 0) == 0;
    unloads += line.rfind("aclmdlUnload ", 0) == 0;
  }
  EXPECT_EQ(inits, 1) << "never initialized again";
  EXPECT_GE(unloads, 8);
  EXPECT_THAT(record.back(), StartsWith("aclFinalizeReference refcount=0"));
  EXPECT_THAT(record[record.size() - 2], StartsWith("aclrtResetDevice device=0 count=0"));
}

TEST(AclLifecycleTest, PreflightSumsAclmdlQuerySizeAndRefusesWhatTheCardCannotHold) {
  testing::TempDir dir;
  ::setenv("ASCEND_HOME_PATH", testing::AclSimHome().c_str(), 1);
  const std::string config = WriteConfig(dir);
  auto [code, out] = ServerProcess::Run({"validate", config});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("device acl:0: budget 3686.4 MiB (capacity 4096.0 MiB x "
                             "preflight.max_fill 0.90); the device has 4096.0 MiB, 4096.0 MiB "
                             "free now"));
  EXPECT_THAT(out, HasSubstr("aclmdlQuerySize: 2 x (work 1 MiB + weight 4 MiB)"));
  EXPECT_THAT(out, HasSubstr("aclmdlQuerySize: weight 8 MiB + 1 x work 2 MiB (pool)"));
  // det 10 + guarded 5 + cls 10 = 25 MiB, x 1.2 = 30 MiB
  EXPECT_THAT(out, HasSubstr("start-up total 25.0 MiB x 1.20 = 30.0 MiB"));

  // The rule is 90 % of the card, once: 30 MiB fits in 0.9 x 34 MiB = 30.6 MiB.
  ::setenv("ACLSIM_MEMORY_MB", "34", 1);
  std::tie(code, out) = ServerProcess::Run({"validate", config});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("= 30.0 MiB within the budget (30.6 MiB, 90% of 34.0 MiB): fits"));

  ::setenv("ACLSIM_MEMORY_MB", "30", 1);  // 27 MiB usable: 30 MiB does not fit
  std::tie(code, out) = ServerProcess::Run(
      {"serve", config, "--port", "0", "--lock-dir", (dir.path() / "locks").string()});
  EXPECT_EQ(code, 4) << out;
  EXPECT_THAT(out, HasSubstr("refusing to start: the start-up models do not fit in device acl:0"));
  EXPECT_THAT(out, HasSubstr("DOES NOT FIT"));
  EXPECT_THAT(out, HasSubstr("load: on_demand for 'det' (saves 12.0 MiB"));
  std::tie(code, out) = ServerProcess::Run({"validate", "--no-plan", config});
  EXPECT_EQ(code, 0) << "--no-plan skips the plan: " << out;

  // Capacity would do, but another process holds 80 of the card's 100 MiB.
  ::setenv("ACLSIM_MEMORY_MB", "100", 1);
  ::setenv("ACLSIM_OTHERS_MB", "80", 1);
  std::tie(code, out) = ServerProcess::Run({"validate", config});
  ::unsetenv("ACLSIM_MEMORY_MB");
  ::unsetenv("ACLSIM_OTHERS_MB");
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("20.0 MiB free now (80.0 MiB held by others)"));
  EXPECT_THAT(out, HasSubstr("and exceeds the 20.0 MiB free now: DOES NOT FIT"));
}

TEST(AclLifecycleTest, DoctorReportsAscendWhenPresentAndSaysSoWhenNot) {
  auto [code, out] = testing::RunShell("ASCEND_HOME_PATH=" + testing::AclSimHome() + " " +
                                       testing::MmserveBinary() + " doctor 2>/dev/null");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("AscendCL: found (" + testing::AclSimLibrary() + "), ACL 1.15.0"));
  EXPECT_THAT(out, HasSubstr("CANN version: simulated"));
  EXPECT_THAT(out, HasSubstr("SoC: Ascend310P3"));
  EXPECT_THAT(out, HasSubstr("devices: 1"));
  EXPECT_THAT(out, HasSubstr("device 0: 4096.0 MiB free of 4096.0 MiB"));
  EXPECT_THAT(out, HasSubstr("npu-smi: "));
  std::tie(code, out) = testing::RunShell(std::string("env -u ASCEND_HOME_PATH -u MMSERVE_ACL_LIBRARY ") +
                                          testing::MmserveBinary() + " doctor 2>/dev/null");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("AscendCL: not found — mmserve runs without it"));
}

}  // namespace
}  // namespace mmserve
