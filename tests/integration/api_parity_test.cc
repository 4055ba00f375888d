// What llama-server and Ollama users reach for besides inference, through the real binary:
// /tokenize and /detokenize in llama-server's shapes, and a model's details under
// /v1/models/{id}.
#include <cmath>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

class ApiParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string yaml =
        "models:\n  - name: embedder\n    path: " + testing::GeneratedModel("bert-tiny.gguf") +
        "\n    keep_alive: 5m\n  - name: llm\n    path: " +
        testing::GeneratedModel("llama-tiny.gguf") +
        "\n    params: {n_ctx: 512, n_parallel: 2}\n  - name: echo\n    backend: identity\n";
    server_ = std::make_unique<testing::ServerProcess>(
        std::vector<std::string>{"serve", dir_.Write("m.yaml", yaml).string(), "--port", "0",
                                 "--grpc-port", "-1", "--lock-dir", dir_.path().string()},
        dir_.path() / "server.log");
    ASSERT_TRUE(server_->Start()) << server_->Log();
    http_ = std::make_unique<testing::HttpClient>(server_->port());
  }
  json Post(const std::string& target, const json& body, int status = 200) {
    auto res = http_->Post(target, body.dump());
    EXPECT_EQ(res.status, status) << target << " " << res.body;
    return json::parse(res.body, nullptr, false);
  }
  testing::TempDir dir_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<testing::HttpClient> http_;
};

TEST_F(ApiParityTest, TokenizeAndDetokenizeRoundTripInLlamaServersShapes) {
  const json tokens = Post("/tokenize", {{"model", "llm"}, {"content", "Hello world, hello!"}});
  ASSERT_TRUE(tokens["tokens"].is_array());
  ASSERT_GT(tokens["tokens"].size(), 2u);
  const json text = Post("/detokenize", {{"model", "llm"}, {"tokens", tokens["tokens"]}});
  // The pieces joined as they are, as llama-server does: SentencePiece's leading space stays
  // (tokenize_parity_test compares every case with llama-server itself).
  EXPECT_EQ(text["content"], " Hello world, hello!");
  // add_special puts the model's BOS first; with_pieces gives each token's text.
  const json special = Post("/tokenize", {{"model", "llm"}, {"content", "Hello"},
                                          {"add_special", true}, {"with_pieces", true}});
  ASSERT_GE(special["tokens"].size(), 2u);
  std::string joined;
  for (size_t i = 1; i < special["tokens"].size(); ++i) {
    joined += special["tokens"][i]["piece"].get<std::string>();
  }
  EXPECT_THAT(joined, HasSubstr("Hello"));
  EXPECT_TRUE(special["tokens"][0]["id"].is_number_integer());
  // The encoder has a vocabulary too.
  EXPECT_GT(Post("/tokenize", {{"model", "embedder"}, {"content", "hi"}})["tokens"].size(), 0u);
}

TEST_F(ApiParityTest, TokenizerErrorsNameTheField) {
  // Two llama models: which one must be said.
  json e = Post("/tokenize", {{"content", "x"}}, 400);
  EXPECT_EQ(e["error"]["param"], "model");
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("embedder, llm"));
  e = Post("/detokenize", {{"model", "llm"}, {"tokens", {1, 99999999}}}, 400);
  EXPECT_EQ(e["error"]["param"], "tokens[1]");
  e = Post("/detokenize", {{"model", "llm"}, {"tokens", {1, -3}}}, 400);
  EXPECT_EQ(e["error"]["param"], "tokens[1]");
  e = Post("/tokenize", {{"model", "llm"}, {"content", 5}}, 400);
  EXPECT_EQ(e["error"]["param"], "content");
  e = Post("/tokenize", {{"model", "echo"}, {"content", "x"}}, 501);
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("no tokenizer"));
  Post("/tokenize", {{"model", "nope"}, {"content", "x"}}, 404);
}

TEST_F(ApiParityTest, ModelDetailsGiveSizeContextWidthAndKeepAlive) {
  auto res = http_->Get("/v1/models/embedder");
  ASSERT_EQ(res.status, 200) << res.body;
  json m = json::parse(res.body);
  EXPECT_EQ(m["size_bytes"],
            std::filesystem::file_size(testing::GeneratedModel("bert-tiny.gguf")));
  EXPECT_EQ(m["embedding_length"], 64);
  EXPECT_GT(m["context_length"].get<int64_t>(), 0);
  EXPECT_GT(m["memory_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(m["keep_alive"]["seconds"], 300);
  EXPECT_GT(m["keep_alive"]["expires_in_s"].get<double>(), 290);
  m = json::parse(http_->Get("/v1/models/llm").body);
  EXPECT_EQ(m["context_length"], 512);  // per sequence: params.n_ctx
  EXPECT_TRUE(m["embedding_length"].is_null());
  EXPECT_TRUE(m["keep_alive"]["seconds"].is_null());  // never unloads
}

}  // namespace
}  // namespace mmserve

namespace mmserve {
namespace {

// `dimensions` as OpenAI and vLLM take it: a model declared with the widths it was trained to be
// cut to (params.matryoshka_dims) gives the first d values, normalized again; any other width,
// or a model declared with none, is a 400 that lists what it gives.
TEST(MatryoshkaTest, DimensionsCutOnlyAModelTrainedForIt) {
  testing::TempDir dir;
  const std::string yaml = "models:\n  - name: mrl\n    path: " +
                           testing::GeneratedModel("bert-tiny.gguf") +
                           "\n    params: {matryoshka_dims: [16, 32]}\n  - name: plain\n    path: " +
                           testing::GeneratedModel("bert-tiny.gguf") + "\n";
  testing::ServerProcess server({"serve", dir.Write("m.yaml", yaml).string(), "--port", "0",
                                 "--grpc-port", "-1", "--lock-dir", dir.path().string()},
                                dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  testing::HttpClient client(server.port());
  auto embed = [&](const std::string& model, const json& dimensions, int status) {
    json body = {{"model", model}, {"input", "the quick brown fox"}};
    if (!dimensions.is_null()) body["dimensions"] = dimensions;
    auto res = client.Post("/v1/embeddings", body.dump());
    EXPECT_EQ(res.status, status) << res.body;
    return json::parse(res.body, nullptr, false);
  };
  const auto full = embed("mrl", nullptr, 200)["data"][0]["embedding"].get<std::vector<double>>();
  ASSERT_EQ(full.size(), 64u);
  const auto cut = embed("mrl", 32, 200)["data"][0]["embedding"].get<std::vector<double>>();
  ASSERT_EQ(cut.size(), 32u);
  double norm = 0, head = 0;
  for (size_t i = 0; i < 32; ++i) {
    norm += cut[i] * cut[i];
    head += full[i] * full[i];
  }
  EXPECT_NEAR(norm, 1.0, 1e-5);
  for (size_t i = 0; i < 32; ++i) EXPECT_NEAR(cut[i], full[i] / std::sqrt(head), 1e-5) << i;
  EXPECT_EQ(embed("mrl", 64, 200)["data"][0]["embedding"].size(), 64u);
  json e = embed("mrl", 20, 400);
  EXPECT_EQ(e["error"]["param"], "dimensions");
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("gives 64, 16, 32 dimensions"));
  e = embed("plain", 32, 400);
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("no params.matryoshka_dims"));
}

}  // namespace
}  // namespace mmserve
