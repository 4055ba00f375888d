// KServe v2 gRPC through the real binary on 127.0.0.1, called by a client no one here wrote:
// Debian's python3-grpcio with stubs generated from the project's .proto by protoc's own
// Python generators. ServerLive/Metadata, ModelMetadata, ModelInfer (typed and raw contents) on
// the embedder and an identity model, token streaming over ModelStreamInfer, ModelConfig,
// ModelStatistics, status codes, and the API/admin keys.
#include <algorithm>
#include <cstdio>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/grpc_python.h"
#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

using testing::GrpcPort;
using testing::RunGrpcClient;

TEST(GrpcTest, PythonClientInfersStreamsAndReadsMetadata) {
  testing::TempDir dir;
  const auto yaml = dir.Write(
      "models.yaml",
      "global: {grpc_port: 0}\nmodels:\n  - name: embedder\n    path: " +
          testing::GeneratedModel("bert-tiny.gguf") + "\n    task: embed\n  - name: llm\n"
          "    path: " + testing::GeneratedModel("llama-tiny.gguf") +
          "\n    task: generate\n    params: {n_ctx: 512}\n  - name: echo\n"
          "    backend: identity\n    params: {tensors: [{input: X, output: Y, datatype: INT32}]}\n");
  testing::ServerProcess server({"serve", yaml.string(), "--port", "0", "--lock-dir",
                                 (dir.path() / "locks").string()},
                                dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  const int port = GrpcPort(server.Log());
  ASSERT_GT(port, 0) << server.Log();
  const json seen = RunGrpcClient(dir, port);

  EXPECT_EQ(seen["live"], true);
  EXPECT_EQ(seen["ready"], true);
  EXPECT_EQ(seen["server"]["name"], "mmserve");
  EXPECT_EQ(seen["embedder_metadata"]["platform"], "llama_gguf");
  EXPECT_EQ(seen["embedder_metadata"]["inputs"][0], json::array({"TEXT", "BYTES"}));
  EXPECT_EQ(seen["embedder_metadata"]["outputs"][0], json::parse(R"(["EMBEDDING","FP32",[-1,64]])"));
  EXPECT_EQ(seen["embed_typed"]["id"], "typed");
  EXPECT_EQ(seen["embed_typed"]["version"], "1");
  EXPECT_EQ(seen["embed_typed"]["shape"], json::array({2, 64}));
  EXPECT_NEAR(seen["embed_typed"]["norm"].get<double>(), 1.0, 1e-5);
  EXPECT_EQ(seen["embed_raw_first"], seen["embed_typed"]["first"]);

  // The same numbers as over REST.
  testing::HttpClient http(server.port());
  auto res = http.Post("/v2/models/embedder/infer",
                       R"({"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["hello world"]}]})");
  ASSERT_EQ(res.status, 200) << res.body;
  const auto rest = json::parse(res.body)["outputs"][0]["data"].get<std::vector<float>>();
  const auto grpc_first = seen["embed_typed"]["first"].get<std::vector<float>>();
  for (size_t i = 0; i < grpc_first.size(); ++i) EXPECT_FLOAT_EQ(grpc_first[i], rest[i]);

  EXPECT_EQ(seen["echo"], json::array({4, 5, 6}));
  const json& stream = seen["stream"];
  EXPECT_TRUE(stream["errors"].empty()) << stream;
  ASSERT_FALSE(stream["final"].is_null()) << stream;
  EXPECT_EQ(stream["final"]["id"], "gen");
  EXPECT_EQ(stream["final"]["completion_tokens"], 10);
  std::string joined;
  for (const auto& p : stream["pieces"]) joined += p.get<std::string>();
  EXPECT_GE(stream["pieces"].size(), 2u);
  EXPECT_EQ(joined, stream["final"]["text"]);

  EXPECT_EQ(seen["config"]["name"], "embedder");
  EXPECT_EQ(seen["config"]["input_type"], "TYPE_STRING");
  EXPECT_EQ(seen["echo_inference_count"], 1);
  EXPECT_EQ(seen["errors"]["unknown_model"]["code"], "NOT_FOUND");
  EXPECT_EQ(seen["errors"]["bad_datatype"]["code"], "INVALID_ARGUMENT");
  EXPECT_THAT(seen["errors"]["bad_datatype"]["details"].get<std::string>(), HasSubstr("datatype"));
}

TEST(GrpcTest, KeysAreCheckedFromTheAuthorizationMetadata) {
  testing::TempDir dir;
  const auto yaml = dir.Write(
      "models.yaml",
      "global: {grpc_port: 0, api_key: k1, admin_key: k2}\nmodels:\n  - name: echo\n"
      "    backend: identity\n    params: {tensors: [{input: X, output: Y, datatype: INT32}]}\n");
  testing::ServerProcess server({"serve", yaml.string(), "--port", "0", "--lock-dir",
                                 (dir.path() / "locks").string()},
                                dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  const json seen = RunGrpcClient(dir, GrpcPort(server.Log()), "k1");
  EXPECT_EQ(seen["none"], "UNAUTHENTICATED");
  EXPECT_EQ(seen["wrong"], "PERMISSION_DENIED");
  EXPECT_EQ(seen["right"], "OK");
  EXPECT_EQ(seen["unload_with_inference_key"], "PERMISSION_DENIED");
  EXPECT_EQ(seen["live_without_key"], true);
}

// Issue #18's gRPC reproductions: max_in_flight (D5), a uint64 max_tokens past int32 (D6), a
// deeply nested config (C2) and a failure reason that held non-UTF-8 bytes in the index (C4).
TEST(GrpcTest, HostileCallsAreRefusedAndTheServerStaysUp) {
  testing::TempDir dir;
  const auto bad =
      testing::PatchedModel(dir, "bert-tiny.gguf", "badarch.gguf", "bert", "\xff\xfe\xfd\xfc");
  const auto yaml = dir.Write(
      "models.yaml",
      "global: {grpc_port: 0, max_in_flight: 2}\nmodels:\n  - name: llm\n    path: " +
          testing::GeneratedModel("llama-tiny.gguf") +
          "\n    task: generate\n    params: {n_ctx: 256}\n  - name: slow\n"
          "    backend: identity\n    thread_num: 2\n    params: {latency_ms: 300, tensors: "
          "[{input: X, output: Y, datatype: INT32}]}\n");
  testing::ServerProcess server({"serve", yaml.string(), "--port", "0", "--lock-dir",
                                 (dir.path() / "locks").string()},
                                dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  const json seen = RunGrpcClient(dir, GrpcPort(server.Log()), "hostile " + bad.string());
  const std::string out = seen.dump();
  const auto codes = seen["in_flight"].get<std::vector<std::string>>();
  EXPECT_GE(std::count(codes.begin(), codes.end(), "OK"), 2) << out;
  EXPECT_GE(std::count(codes.begin(), codes.end(), "UNAVAILABLE"), 1) << out;
  EXPECT_EQ(seen["max_tokens"], "INVALID_ARGUMENT");
  EXPECT_EQ(seen["deep_config"], "INVALID_ARGUMENT");
  EXPECT_NE(seen["bad_load"], "OK");
  EXPECT_TRUE(seen["index"].contains("llm")) << out;
  testing::HttpClient http(server.port());
  EXPECT_EQ(http.Get("/v2/health/live").status, 200);
}

}  // namespace
}  // namespace mmserve
