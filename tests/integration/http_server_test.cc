// The real mmserve binary serving two identity models on 127.0.0.1, driven by an HTTP client.
#include <signal.h>

#include <cstring>
#include <functional>
#include <future>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::HttpClient;
using testing::ServerProcess;

const std::vector<std::string> kTypes = {"BOOL",  "UINT8", "UINT16", "UINT32", "UINT64",
                                         "INT8",  "INT16", "INT32",  "INT64",  "FP16",
                                         "BF16",  "FP32",  "FP64",   "BYTES"};

// `echo` has one optional input per datatype (IN_<TYPE> → OUT_<TYPE>); `slow` takes 300 ms;
// `inline_echo` runs on the server's I/O threads.
std::string Config() {
  std::string yaml = R"(global:
  max_request_mb: 1
  thread_num: 2
models:
  - name: echo
    backend: identity
    max_batch: 4
    params:
      tensors:
)";
  for (const auto& t : kTypes) {
    yaml += "        - {input: IN_" + t + ", output: OUT_" + t + ", datatype: " + t +
            ", shape: [-1], optional: true}\n";
  }
  yaml += R"(  - name: slow
    backend: identity
    params:
      latency_ms: 300
      tensors: [{input: INPUT0, output: OUTPUT0, datatype: INT32, shape: [-1]}]
  - name: inline_echo
    backend: identity
    execution: inline
    params: {tensors: [{input: X, output: Y, datatype: INT32}]}
)";
  return yaml;
}

json SampleData(const std::string& type) {
  if (type == "BOOL") return {true, false, true};
  if (type == "BYTES") return {"alpha", "", "ünïcode"};
  if (type[0] == 'U') return {0, 7, 200};
  if (type[0] == 'I') return {-5, 0, 100};
  return {1.5, -0.25, 8.0};  // exactly representable in FP16 and BF16
}

class HttpServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    server_ = new ServerProcess({"serve", dir_->Write("models.yaml", Config()).string(), "--port",
                                 "0", "--lock-dir", (dir_->path() / "locks").string()},
                                dir_->path() / "server.log");
    ASSERT_TRUE(server_->Start()) << server_->Log();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  void SetUp() override {
    ASSERT_GT(server_->port(), 0) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
  }

  static testing::TempDir* dir_;
  static ServerProcess* server_;
  std::unique_ptr<HttpClient> client_;
};

testing::TempDir* HttpServerTest::dir_ = nullptr;
ServerProcess* HttpServerTest::server_ = nullptr;

TEST_F(HttpServerTest, ServerMetadataAndHealth) {
  auto meta = client_->Get("/v2");
  ASSERT_EQ(meta.status, 200);
  json doc = json::parse(meta.body);
  EXPECT_EQ(doc["name"], "mmserve");
  EXPECT_THAT(doc["extensions"].get<std::vector<std::string>>(),
              ::testing::Contains("binary_tensor_data"));
  EXPECT_EQ(client_->Get("/v2/health/live").status, 200);
  EXPECT_EQ(client_->Get("/v2/health/ready").status, 200);
  EXPECT_TRUE(meta.keep_alive);
}

TEST_F(HttpServerTest, ModelMetadataAndReadiness) {
  auto res = client_->Get("/v2/models/slow");
  ASSERT_EQ(res.status, 200);
  json doc = json::parse(res.body);
  EXPECT_EQ(doc["name"], "slow");
  EXPECT_EQ(doc["versions"], json({"1"}));
  EXPECT_EQ(doc["platform"], "mmserve_identity");
  EXPECT_EQ(doc["inputs"], json::parse(R"([{"name":"INPUT0","datatype":"INT32","shape":[-1]}])"));
  EXPECT_EQ(doc["outputs"][0]["name"], "OUTPUT0");
  EXPECT_EQ(client_->Get("/v2/models/slow/versions/1").status, 200);
  EXPECT_EQ(client_->Get("/v2/models/slow/ready").status, 200);
  EXPECT_EQ(client_->Get("/v2/models/slow/versions/1/ready").status, 200);
  EXPECT_EQ(client_->Get("/v2/models/slow/versions/2").status, 404);
  EXPECT_EQ(json::parse(client_->Get("/v2/models/echo").body)["inputs"].size(), kTypes.size());
}

TEST_F(HttpServerTest, InfersJsonTensorsOfEveryDatatype) {
  json request = {{"id", "req-42"}, {"inputs", json::array()}};
  for (const auto& t : kTypes) {
    request["inputs"].push_back(
        {{"name", "IN_" + t}, {"datatype", t}, {"shape", {3}}, {"data", SampleData(t)}});
  }
  auto res = client_->Post("/v2/models/echo/infer", request.dump());
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(res.headers["content-type"], "application/json");
  json doc = json::parse(res.body);
  EXPECT_EQ(doc["id"], "req-42");
  EXPECT_EQ(doc["model_name"], "echo");
  EXPECT_EQ(doc["model_version"], "1");
  ASSERT_EQ(doc["outputs"].size(), kTypes.size());
  for (const auto& out : doc["outputs"]) {
    const std::string type = out["datatype"];
    EXPECT_EQ(out["name"], "OUT_" + type);
    EXPECT_EQ(out["shape"], json({3}));
    EXPECT_EQ(out["data"], SampleData(type)) << type;
  }
}

TEST_F(HttpServerTest, InfersBinaryTensorsOfEveryDatatype) {
  json header = {{"inputs", json::array()}, {"parameters", {{"binary_data_output", true}}}};
  std::string blobs;
  std::vector<std::string> expected;
  for (size_t i = 0; i < kTypes.size(); ++i) {
    const std::string& t = kTypes[i];
    std::string blob;
    if (t == "BYTES") {
      for (const char* s : {"bin", "", "\x01\x02"}) {
        const uint32_t n = static_cast<uint32_t>(std::strlen(s));
        blob.append(reinterpret_cast<const char*>(&n), 4).append(s, n);
      }
    } else {
      const size_t width = t == "BOOL" || t == "UINT8" || t == "INT8" ? 1
                           : t.find("16") != std::string::npos        ? 2
                           : t.find("32") != std::string::npos        ? 4
                                                                      : 8;
      for (size_t b = 0; b < 3 * width; ++b) blob.push_back(static_cast<char>(t == "BOOL" ? b % 2 : i + b));
    }
    header["inputs"].push_back({{"name", "IN_" + t},
                                {"datatype", t},
                                {"shape", {3}},
                                {"parameters", {{"binary_data_size", blob.size()}}}});
    blobs += blob;
    expected.push_back(blob);
  }
  const std::string json_part = header.dump();
  auto res = client_->Post("/v2/models/echo/infer", json_part + blobs,
                           {{"Inference-Header-Content-Length", std::to_string(json_part.size())},
                            {"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(res.status, 200) << res.body;
  const size_t header_length = std::stoul(res.headers["inference-header-content-length"]);
  json doc = json::parse(res.body.substr(0, header_length));
  size_t offset = header_length;
  ASSERT_EQ(doc["outputs"].size(), kTypes.size());
  for (size_t i = 0; i < kTypes.size(); ++i) {
    const auto& out = doc["outputs"][i];
    const size_t size = out["parameters"]["binary_data_size"];
    EXPECT_EQ(out["name"], "OUT_" + kTypes[i]);
    EXPECT_EQ(res.body.substr(offset, size), expected[i]) << kTypes[i];
    offset += size;
  }
  EXPECT_EQ(offset, res.body.size());
}

TEST_F(HttpServerTest, RawBinaryRequestToASingleInputModel) {
  const int32_t values[3] = {4, 5, 6};
  auto res = client_->Post("/v2/models/slow/infer",
                           std::string(reinterpret_cast<const char*>(values), 12),
                           {{"Inference-Header-Content-Length", "0"}});
  ASSERT_EQ(res.status, 200) << res.body;
  const size_t header_length = std::stoul(res.headers["inference-header-content-length"]);
  EXPECT_EQ(json::parse(res.body.substr(0, header_length))["outputs"][0]["shape"], json({3}));
  EXPECT_EQ(res.body.substr(header_length), std::string(reinterpret_cast<const char*>(values), 12));
}

TEST_F(HttpServerTest, UnknownModelAndRouteAre404) {
  auto res = client_->Post("/v2/models/nope/infer", R"({"inputs":[]})");
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(json::parse(res.body)["error"], "unknown model 'nope'");
  EXPECT_EQ(client_->Get("/v2/models/nope").status, 404);
  EXPECT_EQ(client_->Get("/v3/anything").status, 404);
}

TEST_F(HttpServerTest, BadRequestsAre400WithAMessageNamingTheField) {
  auto error = [&](const std::string& body) {
    auto res = client_->Post("/v2/models/slow/infer", body);
    EXPECT_EQ(res.status, 400) << res.body;
    return json::parse(res.body)["error"].get<std::string>();
  };
  EXPECT_THAT(error("{\"inputs\": [{\"name\": "),
              ::testing::StartsWith("request body is not valid JSON: "));
  EXPECT_EQ(error(R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]})"),
            "model 'slow': input 'INPUT0': expected datatype INT32, found FP32");
  EXPECT_EQ(error(R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"data":[1]}]})"),
            "model 'slow': input 'INPUT0': expected shape [-1], found [1,1]");
  EXPECT_EQ(error(R"({"inputs":[]})"), "model 'slow': missing input 'INPUT0'");
  EXPECT_EQ(error(R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2],"data":[1]}]})"),
            "inputs[0] ('INPUT0').data: shape [2] needs 2 elements, found 1");
  EXPECT_EQ(error(R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":["x"]}]})"),
            "inputs[0] ('INPUT0').data[0]: \"x\" is not a valid INT32");
  // The connection survives every one of these.
  EXPECT_EQ(client_->Get("/v2/health/live").status, 200);
}

TEST_F(HttpServerTest, OversizedBodyIs413) {
  const std::string big(2u << 20, ' ');
  auto res = client_->Post("/v2/models/slow/infer", big);
  EXPECT_EQ(res.status, 413);
  EXPECT_THAT(json::parse(res.body)["error"].get<std::string>(),
              HasSubstr("exceeds the limit of 1048576 bytes"));
}

TEST_F(HttpServerTest, WrongMethodIs405) {
  EXPECT_EQ(client_->Get("/v2/models/slow/infer").status, 405);
}

// 8 clients on keep-alive connections at once, 20 requests each: `input(c, i)` is client c's
// i-th INT32 tensor (`name`); the answer must carry it back as its first output. Returns how
// many answers each client found right.
std::vector<int> EchoFromConcurrentClients(int port, const std::string& model,
                                           const std::string& name,
                                           std::function<json(int, int)> input) {
  std::vector<std::future<int>> results;
  for (int c = 0; c < 8; ++c) {
    results.push_back(std::async(std::launch::async, [&, c] {
      HttpClient client(port);
      int ok = 0;
      for (int i = 0; i < 20; ++i) {
        const json data = input(c, i);
        json req = {
            {"inputs",
             {{{"name", name}, {"datatype", "INT32"}, {"shape", {data.size()}}, {"data", data}}}}};
        auto res = client.Post("/v2/models/" + model + "/infer", req.dump());
        if (res.status == 200 && json::parse(res.body)["outputs"][0]["data"] == data) ++ok;
      }
      return ok;
    }));
  }
  std::vector<int> oks;
  for (auto& r : results) oks.push_back(r.get());
  return oks;
}

TEST_F(HttpServerTest, ConcurrentClientsAreServedOnKeepAliveConnections) {
  auto input = [](int c, int i) { return json::array({c * 100 + i}); };
  EXPECT_THAT(EchoFromConcurrentClients(server_->port(), "echo", "IN_INT32", input),
              ::testing::Each(20));
}

TEST_F(HttpServerTest, AnInlineModelServesConcurrentClientsWithoutWorkers) {
  auto input = [](int c, int i) { return json::array({c, i}); };
  EXPECT_THAT(EchoFromConcurrentClients(server_->port(), "inline_echo", "X", input),
              ::testing::Each(20));
  auto bad =
      client_->Post("/v2/models/inline_echo/infer",
                    R"({"inputs":[{"name":"X","datatype":"INT32","shape":[1],"data":["a"]}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["error"], "inputs[0] ('X').data[0]: \"a\" is not a valid INT32");
  const json stats = json::parse(client_->Get("/v2/models/inline_echo/stats").body);
  const json& model = stats["model_stats"][0];
  EXPECT_EQ(model["inference_count"], 160);
  EXPECT_EQ(model["mmserve"]["execution"], "inline");
  EXPECT_TRUE(model["mmserve"]["workers"].empty());
}

TEST_F(HttpServerTest, ASecondServerOnTheSameDeviceIsRefused) {
  ServerProcess second({"serve", (dir_->path() / "models.yaml").string(), "--port", "0",
                        "--lock-dir", (dir_->path() / "locks").string()},
                       dir_->path() / "second.log");
  EXPECT_FALSE(second.Start(std::chrono::seconds(10)));
  EXPECT_THAT(second.Log(), HasSubstr("refusing to start: device 0 is already served by another "
                                      "mmserve (pid " + std::to_string(server_->pid())));
}

// Each shutdown test runs its own server.
class ShutdownTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(ShutdownTest, SigtermDrainsInFlightRequestsAndUnloadsInReverseLoadOrder) {
  ServerProcess server({"serve", dir_.Write("models.yaml", Config()).string(), "--port", "0",
                        "--lock-dir", (dir_.path() / "locks").string()},
                       dir_.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  auto in_flight = std::async(std::launch::async, [port = server.port()] {
    HttpClient client(port);
    return client.Post("/v2/models/slow/infer",
                       R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[9]}]})");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the request is executing
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
  auto res = in_flight.get();
  EXPECT_EQ(res.status, 200) << "the request accepted before SIGTERM was answered";

  const std::string log = server.Log();
  const std::vector<std::string> steps = {
      "model echo: loaded", "model slow: loaded", "received SIGTERM",
      "http: stopped accepting connections", "model slow: unloading", "model slow: unloaded",
      "model echo: unloading", "model echo: unloaded", "runtime host: finalized",
      "shutdown complete"};
  size_t at = 0;
  for (const auto& step : steps) {
    const size_t found = log.find(step, at);
    ASSERT_NE(found, std::string::npos) << "'" << step << "' missing or out of order in\n" << log;
    at = found;
  }
}

TEST_F(ShutdownTest, SigintAlsoExitsZeroAndReleasesTheDevice) {
  const auto config = dir_.Write("models.yaml", Config()).string();
  const auto locks = (dir_.path() / "locks").string();
  {
    ServerProcess server({"serve", config, "--port", "0", "--lock-dir", locks},
                         dir_.path() / "a.log");
    ASSERT_TRUE(server.Start()) << server.Log();
    EXPECT_EQ(server.Stop(SIGINT), 0);
  }
  ServerProcess again({"serve", config, "--port", "0", "--lock-dir", locks},
                      dir_.path() / "b.log");
  ASSERT_TRUE(again.Start()) << again.Log();
  EXPECT_EQ(again.Stop(SIGTERM), 0);
}

TEST_F(ShutdownTest, StaleLockOfAKilledServerIsTakenOver) {
  const auto config = dir_.Write("models.yaml", Config()).string();
  const auto locks = (dir_.path() / "locks").string();
  pid_t killed;
  {
    ServerProcess server({"serve", config, "--port", "0", "--lock-dir", locks},
                         dir_.path() / "a.log");
    ASSERT_TRUE(server.Start()) << server.Log();
    killed = server.pid();
    EXPECT_EQ(server.Stop(SIGKILL), 128 + SIGKILL);
  }
  ServerProcess next({"serve", config, "--port", "0", "--lock-dir", locks}, dir_.path() / "b.log");
  ASSERT_TRUE(next.Start()) << next.Log();
  EXPECT_THAT(next.Log(), HasSubstr("took over the lock left by exited process " +
                                    std::to_string(killed)));
  EXPECT_EQ(next.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace mmserve
