// Residency through the real binary on 127.0.0.1: an on-demand model loads once for a burst of
// first requests, and a keep-alive unloads it when idle while the server stays ready.
#include <future>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::HttpClient;
using testing::HttpResult;
using testing::ServerProcess;

constexpr const char* kConfig = R"(models:
  - name: always
    backend: identity
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: lazy
    backend: identity
    load: on_demand
    keep_alive: 400ms
    params: {load_ms: 300, memory_mb: 8, tensors: [{input: X, output: Y, datatype: INT32}]}
)";

TEST(ResidencyTest, OnDemandLoadsOnceForABurstAndKeepAliveUnloadsWhenIdle) {
  testing::TempDir dir;
  ServerProcess server({"serve", dir.Write("m.yaml", kConfig).string(), "--port", "0",
                        "--lock-dir", (dir.path() / "locks").string()},
                       dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient client(server.port());
  EXPECT_EQ(client.Get("/v2/health/ready").status, 200);
  json meta = json::parse(client.Get("/v2/models/lazy").body);
  EXPECT_EQ(meta["state"], "UNLOADED");
  EXPECT_THAT(meta["reason"].get<std::string>(), HasSubstr("loads on its first request"));

  std::vector<std::future<HttpResult>> burst;
  for (int i = 0; i < 20; ++i) {
    burst.push_back(std::async(std::launch::async, [port = server.port(), i] {
      HttpClient c(port);
      json body = {{"inputs", {{{"name", "X"}, {"datatype", "INT32"}, {"shape", {1}},
                                {"data", {i}}}}}};
      return c.Post("/v2/models/lazy/infer", body.dump());
    }));
  }
  for (int i = 0; i < 20; ++i) {
    HttpResult res = burst[static_cast<size_t>(i)].get();
    ASSERT_EQ(res.status, 200) << res.body;
    EXPECT_EQ(json::parse(res.body)["outputs"][0]["data"][0], i);
  }
  json stats = json::parse(client.Get("/v2/models/lazy/stats").body)["model_stats"][0]["mmserve"];
  EXPECT_EQ(stats["loads"], 1);
  EXPECT_EQ(stats["state"], "READY");

  // Idle past its keep-alive: unloaded, the server still ready, the next request reloads it.
  std::this_thread::sleep_for(700ms);
  meta = json::parse(client.Get("/v2/models/lazy").body);
  EXPECT_EQ(meta["state"], "UNLOADED");
  EXPECT_THAT(meta["reason"].get<std::string>(), HasSubstr("after idling"));
  EXPECT_EQ(client.Get("/v2/health/ready").status, 200);
  EXPECT_EQ(client.Get("/v2/models/always/ready").status, 200);
  EXPECT_THAT(server.Log(), HasSubstr("model lazy: idle for"));
  HttpResult again = client.Post(
      "/v2/models/lazy/infer",
      R"({"inputs":[{"name":"X","datatype":"INT32","shape":[1],"data":[7]}]})");
  EXPECT_EQ(again.status, 200) << again.body;
  stats = json::parse(client.Get("/v2/models/lazy/stats").body)["model_stats"][0]["mmserve"];
  EXPECT_EQ(stats["loads"], 2);
}

// A version's counters count from the server's start (issue #44): its loads and unloads, and
// its isolated worker's restarts, never take them backwards, and an unloaded version keeps its
// series in /metrics.
TEST(ResidencyTest, AVersionsCountersNeverGoBackwardsAcrossLoadsAndWorkerRestarts) {
  testing::TempDir dir;
  const std::string yaml = R"(models:
  - name: lazy
    backend: identity
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
  - name: iso
    backend: identity
    isolation: process
    params: {crash_on: boom, tensors: [{input: X, output: Y, datatype: BYTES, shape: [-1]}]}
)";
  ServerProcess server({"serve", dir.Write("m.yaml", yaml).string(), "--port", "0",
                        "--lock-dir", (dir.path() / "locks").string()},
                       dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient client(server.port());
  const auto infer = [&](const std::string& model, const json& x) {
    const char* type = x.is_string() ? "BYTES" : "INT32";
    return client.Post("/v2/models/" + model + "/infer",
                       json{{"inputs", {{{"name", "X"}, {"datatype", type}, {"shape", {1}},
                                          {"data", {x}}}}}}.dump()).status;
  };
  const auto sample = [&](const std::string& family, const std::string& model,
                          const std::string& more = "") {
    const std::string text = client.Get("/metrics").body;
    const std::string key = family + "{model=\"" + model + "\",version=\"1\"" + more + "} ";
    const size_t at = text.find(key);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
  };
  const auto counter = [&](const std::string& model, const std::string& name) {
    json stats = json::parse(client.Get("/v2/models/" + model + "/stats").body, nullptr, false);
    const json& counters = stats["model_stats"][0]["mmserve"]["counters"];
    return counters.contains(name) ? counters[name].get<int64_t>() : -1;
  };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(infer("lazy", i), 200);
  ASSERT_EQ(client.Post("/v2/repository/models/lazy/unload", "").status, 200);
  EXPECT_EQ(sample("nv_inference_request_success", "lazy"), 3) << "kept while unloaded";
  EXPECT_EQ(sample("nv_inference_count", "lazy"), 3);
  EXPECT_EQ(sample("mmserve_model_resident_bytes", "lazy", ",device=\"0\""), 0);
  ASSERT_EQ(client.Post("/v2/repository/models/lazy/load", "").status, 200);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(infer("lazy", i), 200);
  EXPECT_EQ(sample("nv_inference_request_success", "lazy"), 5);
  EXPECT_EQ(counter("lazy", "executions"), 5) << "the session's counts carried too";
  const std::string metrics = client.Get("/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("mmserve_request_duration_seconds_count{model=\"lazy\","
                                 "version=\"1\"} 5"));

  // An isolated model: its worker's engine counts survive the worker.
  for (int i = 0; i < 4; ++i) ASSERT_EQ(infer("iso", "x"), 200);
  EXPECT_EQ(counter("iso", "executions"), 4);
  EXPECT_EQ(infer("iso", "boom"), 503);  // the worker dies
  bool back = false;
  for (int i = 0; i < 3000 && !back; ++i) {
    back = infer("iso", "x") == 200;
    if (!back) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(back);
  EXPECT_GE(counter("iso", "executions"), 5) << "4 before the restart, 1 after";
  EXPECT_EQ(counter("iso", "worker_restarts"), 1);
}

}  // namespace
}  // namespace mmserve
