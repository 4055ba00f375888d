// Residency through the real binary on 127.0.0.1: an on-demand model loads once for a burst of
// first requests, and a keep-alive unloads it when idle while the server stays ready.
#include <future>

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

}  // namespace
}  // namespace mmserve
