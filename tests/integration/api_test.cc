// The API surface other clients speak, through the real binary on 127.0.0.1 serving the RAG
// trio: OpenAI-compatible /v1 (raw HTTP here; the official `openai` npm package in
// openai_client_test), the rerank APIs (Jina/Cohere and TEI), Triton's model configuration,
// Prometheus /metrics checked by promtool, and the safety limits (API and admin keys, body
// size, connections, requests in flight, CORS).
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <future>
#include <memory>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/paths.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::HttpClient;
using testing::ServerProcess;
using Server = testing::ConfiguredServer;

std::string TrioConfig(const std::string& global = "") {
  return "global: {" + global + "}\nmodels:\n  - name: embedder\n    path: " +
         testing::GeneratedModel("bert-tiny.gguf") +
         "\n    task: embed\n    max_batch: 16\n  - name: reranker\n    path: " +
         testing::GeneratedModel("rerank-tiny.gguf") +
         "\n    task: rerank\n  - name: llm\n    path: " +
         testing::GeneratedModel("llama-tiny.gguf") +
         "\n    task: generate\n    params: {n_ctx: 512, n_parallel: 4}\n"
         "  - name: echo\n    backend: identity\n    params:\n      latency_ms: 0\n"
         "      tensors: [{input: X, output: Y, datatype: INT32}]\n";
}


json Parse(const testing::HttpResult& res) {
  json j = json::parse(res.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << res.body;
  return j;
}

// The `data:` payloads of a server-sent-event body, in order.
std::vector<std::string> Events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

using testing::RunShell;

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<Server>(TrioConfig());
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
  }
  testing::HttpResult Post(const std::string& target, const json& body) {
    return client_->Post(target, body.dump());
  }
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(ApiTest, ChatCompletionsStreamedEqualsUnstreamedAndEndsWithDone) {
  const json messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                     {{"role", "user"}, {"content", "Name a colour."}}});
  auto res = Post("/v1/chat/completions",
                  {{"model", "llm"}, {"messages", messages}, {"max_tokens", 12},
                   {"temperature", 0}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json chat = Parse(res);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_THAT(chat["id"].get<std::string>(), StartsWith("chatcmpl-"));
  EXPECT_EQ(chat["model"], "llm");
  ASSERT_EQ(chat["choices"].size(), 1u);
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  const std::string text = chat["choices"][0]["message"]["content"];
  EXPECT_THAT(chat["choices"][0]["finish_reason"].get<std::string>(),
              ::testing::AnyOf("stop", "length"));
  const json usage = chat["usage"];
  EXPECT_GT(usage["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(usage["total_tokens"].get<int>(),
            usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());

  res = Post("/v1/chat/completions",
             {{"model", "llm"}, {"messages", messages}, {"max_tokens", 12}, {"temperature", 0},
              {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_THAT(res.headers["content-type"], HasSubstr("text/event-stream"));
  const auto events = Events(res.body);
  ASSERT_GE(events.size(), 4u) << res.body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string streamed;
  std::string finish;
  json stream_usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_EQ(e["id"], json::parse(events[0])["id"]);
    if (e.contains("usage")) {
      stream_usage = e["usage"];
      EXPECT_TRUE(e["choices"].empty());
      continue;
    }
    const json& choice = e["choices"][0];
    if (i == 0) {
      EXPECT_EQ(choice["delta"]["role"], "assistant");
    }
    streamed += choice["delta"].value("content", "");
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(streamed, text);  // greedy: the same tokens either way
  EXPECT_EQ(finish, chat["choices"][0]["finish_reason"]);
  for (const char* key : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
    EXPECT_EQ(stream_usage[key], usage[key]) << key;
  }
  // The second request's prompt was the first's: its cache was reused.
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_GT(stream_usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST_F(ApiTest, StopStringsEndTheTextAndAreNeverStreamed) {
  const json base = {{"model", "llm"}, {"prompt", "The weather today is"}, {"max_tokens", 24},
                     {"temperature", 0}};
  auto res = Post("/v1/completions", base);
  ASSERT_EQ(res.status, 200) << res.body;
  const std::string full = Parse(res)["choices"][0]["text"];
  ASSERT_GE(full.size(), 8u) << full;
  // A stop string taken from the middle of what the model says anyway.
  std::string stop = full.substr(full.size() / 2, 3);
  const size_t cut = full.find(stop);
  json with_stop = base;
  with_stop["stop"] = json::array({"\x01never", stop});
  res = Post("/v1/completions", with_stop);
  ASSERT_EQ(res.status, 200) << res.body;
  const json done = Parse(res);
  EXPECT_EQ(done["choices"][0]["text"], full.substr(0, cut));
  EXPECT_EQ(done["choices"][0]["finish_reason"], "stop");

  with_stop["stream"] = true;
  res = Post("/v1/completions", with_stop);
  ASSERT_EQ(res.status, 200) << res.body;
  std::string streamed;
  for (const auto& e : Events(res.body)) {
    if (e == "[DONE]") break;
    streamed += json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, full.substr(0, cut));

  // Several prompts: one choice each, in order.
  res = Post("/v1/completions", {{"model", "llm"}, {"prompt", {"One", "Two"}}, {"max_tokens", 4},
                                 {"temperature", 0}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json two = Parse(res);
  ASSERT_EQ(two["choices"].size(), 2u);
  EXPECT_EQ(two["choices"][1]["index"], 1);
}

TEST_F(ApiTest, EmbeddingsTakeStringsListsAndTokenIdsInFloatOrBase64) {
  auto res = Post("/v1/embeddings", {{"model", "embedder"}, {"input", {"hello world", "bye"}}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json floats = Parse(res);
  EXPECT_EQ(floats["object"], "list");
  ASSERT_EQ(floats["data"].size(), 2u);
  EXPECT_EQ(floats["data"][1]["index"], 1);
  const auto vector = floats["data"][0]["embedding"].get<std::vector<float>>();
  ASSERT_EQ(vector.size(), 64u);
  EXPECT_GT(floats["usage"]["prompt_tokens"].get<int>(), 2);

  // base64: the little-endian float32 bytes of the same vector.
  res = Post("/v1/embeddings",
             {{"model", "embedder"}, {"input", "hello world"}, {"encoding_format", "base64"}});
  ASSERT_EQ(res.status, 200) << res.body;
  const std::string b64 = Parse(res)["data"][0]["embedding"];
  auto [rc, decoded] = RunShell("printf '%s' '" + b64 + "' | base64 -d | od -An -v -tf4 -w4");
  ASSERT_EQ(rc, 0);
  std::istringstream values(decoded);
  for (size_t i = 0; i < vector.size(); ++i) {
    float v = 0;
    values >> v;
    EXPECT_NEAR(v, vector[i], 1e-6) << i;
  }

  // Token ids are used as given; one outside the vocabulary is refused naming the element.
  res = Post("/v1/embeddings", {{"model", "embedder"}, {"input", {{101, 7592, 102}, {101, 102}}}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(Parse(res)["data"].size(), 2u);
  res = Post("/v1/embeddings", {{"model", "embedder"}, {"input", {{101, 99999999}}}});
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_THAT(res.body, HasSubstr("TOKENS[0]"));
  // An id beyond int32 is refused, not wrapped into some other token.
  res = Post("/v1/embeddings", {{"model", "embedder"}, {"input", {{101, int64_t{1} << 32 | 102}}}});
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_EQ(Parse(res)["error"]["param"], "input[0]");

  // TEI's /embed: bare vectors, the same numbers.
  res = Post("/embed", {{"inputs", {"hello world"}}});
  ASSERT_EQ(res.status, 200) << res.body;
  const auto tei = Parse(res)[0].get<std::vector<float>>();
  ASSERT_EQ(tei.size(), vector.size());
  for (size_t i = 0; i < tei.size(); ++i) EXPECT_NEAR(tei[i], vector[i], 1e-6);
}

TEST_F(ApiTest, RerankInJinaCohereAndTeiShapes) {
  const std::vector<std::string> docs = {"Paris is in France.", "Bananas are yellow.",
                                         "The Eiffel tower is in Paris.", "Rust is a language."};
  // The KServe form gives the raw scores to compare with.
  json kserve = {{"inputs",
                  {{{"name", "QUERY"}, {"datatype", "BYTES"}, {"shape", {1}},
                    {"data", {"Where is Paris?"}}},
                   {{"name", "DOCUMENTS"}, {"datatype", "BYTES"}, {"shape", {docs.size()}},
                    {"data", docs}}}}};
  auto res = Post("/v2/models/reranker/infer", kserve);
  ASSERT_EQ(res.status, 200) << res.body;
  const auto raw = Parse(res)["outputs"][0]["data"].get<std::vector<float>>();

  res = Post("/v1/rerank", {{"model", "reranker"}, {"query", "Where is Paris?"},
                            {"documents", docs}, {"top_n", 3}, {"return_documents", true}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json jina = Parse(res);
  ASSERT_EQ(jina["results"].size(), 3u);
  float previous = INFINITY;
  for (const auto& r : jina["results"]) {
    const size_t i = r["index"];
    // In 0..1 as Jina and Cohere return it: the logit's sigmoid.
    EXPECT_NEAR(r["relevance_score"].get<float>(), 1 / (1 + std::exp(-raw[i])), 1e-5);
    EXPECT_LE(r["relevance_score"].get<float>(), previous);
    previous = r["relevance_score"];
    EXPECT_EQ(r["document"]["text"], docs[i]);
  }
  EXPECT_GT(jina["usage"]["prompt_tokens"].get<int>(), 0);
  // The raw logits only when asked.
  res = Post("/v1/rerank", {{"model", "reranker"}, {"query", "Where is Paris?"},
                            {"documents", docs}, {"raw_scores", true}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_NEAR(Parse(res)["results"][0]["relevance_score"].get<float>(),
              *std::max_element(raw.begin(), raw.end()), 1e-5);

  // TEI: sigmoid unless raw_scores, bare list.
  res = Post("/rerank", {{"query", "Where is Paris?"}, {"texts", docs}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json tei = Parse(res);
  ASSERT_EQ(tei.size(), docs.size());
  for (const auto& r : tei) {
    const size_t i = r["index"];
    EXPECT_NEAR(r["score"].get<float>(), 1 / (1 + std::exp(-raw[i])), 1e-5);
    EXPECT_FALSE(r.contains("text"));
  }
  // TEI's error shape for TEI's requests.
  res = Post("/rerank", {{"query", "Where is Paris?"}, {"texts", json::array()}});
  EXPECT_EQ(res.status, 400);
  EXPECT_EQ(Parse(res)["error_type"], "Validation") << res.body;
  EXPECT_THAT(Parse(res)["error"].get<std::string>(), HasSubstr("texts"));
  res = Post("/rerank", {{"query", "Where is Paris?"}, {"texts", docs}, {"raw_scores", true}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_NEAR(Parse(res)[0]["score"].get<float>(), *std::max_element(raw.begin(), raw.end()),
              1e-5);
}

// One route table (#42): a path with a trailing or doubled slash reaches the route it names,
// which sees its own path; a wrong method is 405 in the route's API's shape; an unknown path is
// 404 in its prefix's shape.
TEST_F(ApiTest, EveryRouteIsFoundByItsSegments) {
  for (const char* path : {"/v2/devices/", "//v2//events", "/ui//status.js", "/metrics/"}) {
    EXPECT_EQ(client_->Get(path).status, 200) << path;
  }
  const json chat = {{"model", "llm"},
                     {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"max_tokens", 2}};
  auto res = Post("/v1//chat/completions/", chat);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(Parse(res)["object"], "chat.completion") << "the chat route, not completions";
  res = client_->Get("/v1/chat/completions");
  EXPECT_EQ(res.status, 405);
  EXPECT_THAT(Parse(res)["error"]["message"].get<std::string>(), HasSubstr("use POST"));
  res = client_->Post("/v2/models/echo/ready", "");
  EXPECT_EQ(res.status, 405) << res.body;
  EXPECT_TRUE(Parse(res).contains("error")) << res.body;
  EXPECT_EQ(client_->Get("/v1/nothing").status, 404);
  EXPECT_TRUE(Parse(client_->Get("/v1/nothing"))["error"].is_object()) << "OpenAI's shape";
  EXPECT_TRUE(Parse(client_->Get("/v2/nothing"))["error"].is_string()) << "KServe's shape";
}

TEST_F(ApiTest, ErrorsUseTheOpenAiShapeAndNameTheField) {
  auto error = [&](const json& body, const std::string& target = "/v1/chat/completions") {
    auto res = Post(target, body);
    json e = Parse(res);
    e["status"] = res.status;
    return e;
  };
  const json hi = json::array({{{"role", "user"}, {"content", "hi"}}});
  json e = error({{"model", "nope"}, {"messages", hi}});
  EXPECT_EQ(e["status"], 404);
  EXPECT_EQ(e["error"]["param"], "model");
  EXPECT_EQ(e["error"]["type"], "not_found_error");
  e = error({{"model", "embedder"}, {"messages", hi}});
  EXPECT_EQ(e["status"], 400);
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("serves task embed"));
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("needs a generate model"));
  e = error({{"model", "llm"}, {"input", "hi"}}, "/v1/embeddings");
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("needs an embed model"));
  e = error({{"model", "llm"}});
  EXPECT_EQ(e["error"]["param"], "messages");
  e = error({{"model", "llm"}, {"messages", {{{"role", "robot"}, {"content", "x"}}}}});
  EXPECT_EQ(e["error"]["param"], "messages[0].role");
  e = error({{"model", "llm"}, {"messages", hi}, {"temperature", 5}});
  EXPECT_EQ(e["error"]["param"], "temperature");
  e = error({{"model", "llm"}, {"messages", hi}, {"n", 2}});
  EXPECT_EQ(e["error"]["param"], "n");
  e = error({{"model", "embedder"}, {"input", ""}}, "/v1/embeddings");
  EXPECT_EQ(e["error"]["param"], "input");
  e = error({{"model", "embedder"}, {"input", "x"}, {"dimensions", 3}}, "/v1/embeddings");
  EXPECT_EQ(e["error"]["param"], "dimensions");
  e = error({{"model", "reranker"}, {"query", "q"}, {"documents", {"a", 3}}}, "/v1/rerank");
  EXPECT_EQ(e["error"]["param"], "documents[1]");
  auto res = client_->Post("/v1/embeddings", "{not json");
  EXPECT_EQ(res.status, 400);
  EXPECT_THAT(res.body, HasSubstr("request body"));
}

// The `dimensions` check and the answer come from one version: a canary whose vectors are
// wider never answers a request that was checked against the stable version's width.
TEST(CanaryApiTest, EmbeddingsResolveTheVersionOnceSoDimensionsHold) {
  testing::TempDir dir;
  for (const auto& [version, file] : {std::pair{"1", "bert-tiny.gguf"}, {"2", "llama-tiny.gguf"}}) {
    std::filesystem::create_directories(dir.path() / "emb" / version);
    std::filesystem::create_symlink(testing::GeneratedModel(file),
                                    dir.path() / "emb" / version / "model.gguf");
  }
  const auto yaml = dir.Write("m.yaml", "models:\n  - name: emb\n    path: " +
                                            (dir.path() / "emb").string() +
                                            "\n    task: embed\n    versions: [1, 2]\n"
                                            "    labels: {stable: 1}\n"
                                            "    canary: {version: 2, weight: 0.5}\n"
                                            "    params: {pooling: mean}\n");
  ServerProcess server({"serve", yaml.string(), "--port", "0", "--lock-dir",
                        (dir.path() / "locks").string()},
                       dir.path() / "server.log");
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient client(server.port());
  int narrow = 0, refused = 0;
  for (int i = 0; i < 40; ++i) {
    auto res = client.Post("/v1/embeddings",
                           json{{"model", "emb"}, {"input", "hello"}, {"dimensions", 64}}.dump());
    const json body = Parse(res);
    if (res.status == 200) {
      ASSERT_EQ(body["data"][0]["embedding"].size(), 64u) << "checked against v1, served by v2";
      ++narrow;
    } else {
      ASSERT_EQ(res.status, 400) << res.body;
      EXPECT_EQ(body["error"]["param"], "dimensions");
      EXPECT_THAT(res.body, HasSubstr("this model gives 128 dimensions"));
      ++refused;
    }
  }
  // Both versions drew requests (each of 40 draws is a coin flip).
  EXPECT_GT(narrow, 0);
  EXPECT_GT(refused, 0);
  // Without a `model`, the one model serving the task answers; no such model is a 404.
  auto only = client.Post("/v1/embeddings", json{{"input", "hello"}}.dump());
  EXPECT_EQ(only.status, 200) << only.body;
  auto none = client.Post("/v1/rerank", json{{"query", "q"}, {"documents", {"a"}}}.dump());
  EXPECT_EQ(none.status, 404) << none.body;
  EXPECT_THAT(none.body, HasSubstr("model: no rerank model is served"));
}

TEST_F(ApiTest, ModelsConfigAndMetricsAfterTraffic) {
  auto res = client_->Get("/v1/models");
  ASSERT_EQ(res.status, 200) << res.body;
  std::map<std::string, std::string> tasks;
  const json listed = Parse(res);
  for (const auto& m : listed["data"]) {
    tasks[m["id"].get<std::string>()] = m["task"].get<std::string>();
  }
  EXPECT_EQ(tasks["embedder"], "embed") << res.body;
  EXPECT_EQ(tasks["reranker"], "rerank");
  EXPECT_EQ(tasks["llm"], "generate");
  EXPECT_EQ(client_->Get("/v1/models/llm").status, 200);
  EXPECT_EQ(client_->Get("/v1/models/nope").status, 404);

  res = client_->Get("/v2/models/embedder/config");
  ASSERT_EQ(res.status, 200) << res.body;
  const json config = Parse(res);
  EXPECT_EQ(config["name"], "embedder");
  EXPECT_EQ(config["input"][0]["name"], "TEXT");
  EXPECT_EQ(config["input"][0]["data_type"], "TYPE_STRING");
  EXPECT_EQ(config["output"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(config["max_batch_size"], 0);
  EXPECT_TRUE(config.contains("dynamic_batching"));
  EXPECT_THAT(Parse(client_->Get("/v2"))["extensions"].dump(), HasSubstr("model_configuration"));

  ASSERT_EQ(Post("/v1/embeddings", {{"model", "embedder"}, {"input", "x"}}).status, 200);
  ASSERT_EQ(Post("/v1/completions", {{"model", "llm"}, {"prompt", "Hi"}, {"max_tokens", 3}})
                .status,
            200);
  ASSERT_EQ(Post("/v2/models/echo/infer",
                 {{"inputs", {{{"name", "X"}, {"datatype", "INT32"}, {"shape", {1}},
                               {"data", {1}}}}}})
                .status,
            200);
  res = client_->Get("/metrics");
  ASSERT_EQ(res.status, 200);
  EXPECT_THAT(res.headers["content-type"], HasSubstr("text/plain"));
  EXPECT_THAT(res.body, HasSubstr("nv_inference_request_success{model=\"embedder\",version=\"1\"} 1"));
  EXPECT_THAT(res.body, HasSubstr("nv_inference_count{model=\"echo\",version=\"1\"} 1"));
  EXPECT_THAT(res.body, HasSubstr("mmserve_model_resident_bytes{model=\"llm\""));
  EXPECT_THAT(res.body, HasSubstr("mmserve_time_to_first_token_seconds_count{model=\"llm\","
                                  "version=\"1\"} 1"));
  EXPECT_THAT(res.body, ::testing::ContainsRegex(
                            "mmserve_tokens_generated_total\\{model=\"llm\",version=\"1\"\\} [1-9]"));
  const auto file = server_->dir().Write("metrics.txt", res.body);
  auto [rc, out] = RunShell("promtool check metrics < " + file.string() + " 2>&1");
  // Triton's families are typed as Triton types them, under Triton's names (no "_total", a
  // "_count" that is no histogram's): dashboards built for Triton read them as they are. Those
  // names are the only lint promtool may report.
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_THAT(line, ::testing::AnyOf(
                          ::testing::MatchesRegex("nv_inference_[a-z_]+ counter metrics should "
                                                  "have \"_total\" suffix"),
                          ::testing::MatchesRegex("nv_inference_[a-z_]+ non-histogram and "
                                                  "non-summary metrics should not have "
                                                  "\"_count\" suffix")));
  }
  EXPECT_THAT(rc, ::testing::AnyOf(0, 3)) << out;  // 3: lint problems, the ones above only
}

// The official `openai` npm package (pinned; scripts/test.sh installs it into .deps/node).
TEST(OpenAiClientTest, OfficialSdkRunsChatCompletionsAndEmbeddings) {
  const std::string modules = testing::SourceDir() + "/.deps/node/node_modules";
  ASSERT_TRUE(std::filesystem::exists(modules + "/openai/package.json"))
      << "the openai npm package is missing: scripts/test.sh installs it";
  Server server(TrioConfig());
  ASSERT_TRUE(server.Start()) << server.Log();
  auto [rc, out] = RunShell("NODE_PATH=" + modules + " node " + testing::SourceDir() +
                         "/tests/integration/clients/openai_client.cjs " +
                         std::to_string(server.port()) + " 2>&1");
  ASSERT_EQ(rc, 0) << out << server.Log();
  const json seen = json::parse(out.substr(out.rfind("\n{") == std::string::npos
                                               ? 0
                                               : out.rfind("\n{") + 1));
  const std::string text = seen["chat"]["choices"][0]["message"]["content"];
  EXPECT_EQ(seen["chat"]["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(seen["stream"]["text"], text);
  EXPECT_EQ(seen["stream"]["roles"], json::array({"assistant"}));
  EXPECT_EQ(seen["stream"]["finish"], seen["chat"]["choices"][0]["finish_reason"]);
  // The same counts; the second request found the first's prompt cached (cached_tokens).
  for (const char* key : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
    EXPECT_EQ(seen["stream"]["usage"][key], seen["chat"]["usage"][key]) << key;
  }
  EXPECT_GT(seen["chat"]["usage"]["completion_tokens"].get<int>(), 0);
  EXPECT_EQ(seen["completion"]["object"], "text_completion");
  EXPECT_EQ(seen["completion_stream"], seen["completion"]["choices"][0]["text"]);
  EXPECT_EQ(seen["embeddings"]["count"], 2);
  EXPECT_EQ(seen["embeddings"]["dims"], 64);
  EXPECT_EQ(seen["embeddings"]["indexes"], json::array({0, 1}));
  const auto b64 = seen["embeddings"]["first"].get<std::vector<float>>();
  const auto floats = seen["embedding_float_first"].get<std::vector<float>>();
  ASSERT_EQ(b64.size(), floats.size());
  for (size_t i = 0; i < b64.size(); ++i) EXPECT_NEAR(b64[i], floats[i], 1e-6);
  std::set<std::string> ids;
  for (const auto& m : seen["models"]) ids.insert(m["id"]);
  EXPECT_TRUE(ids.contains("llm") && ids.contains("embedder") && ids.contains("reranker"));
  EXPECT_EQ(seen["error"]["status"], 404);
  EXPECT_EQ(seen["error"]["param"], "model");
}

// A server with keys, a small body limit, CORS for one origin and tight connection limits.
std::string GuardedConfig(const std::string& limits) {
  return "global: {api_key: inference-key, admin_key: admin-key, max_request_mb: 1, "
         "cors_origins: [\"https://app.example\"], " + limits + "}\n"
         "models:\n  - name: echo\n    backend: identity\n    params:\n"
         "      latency_ms: 300\n      tensors: [{input: X, output: Y, datatype: INT32}]\n";
}

const std::string kEcho =
    R"({"inputs":[{"name":"X","datatype":"INT32","shape":[1],"data":[7]}]})";

TEST(GuardedApiTest, KeysBodyLimitAndCors) {
  Server server(GuardedConfig("max_connections: 64"));
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient client(server.port());
  const std::map<std::string, std::string> inference = {{"Authorization", "Bearer inference-key"}};
  const std::map<std::string, std::string> admin = {{"Authorization", "Bearer admin-key"}};

  EXPECT_EQ(client.Get("/v2/health/ready").status, 200);  // probes need no key
  auto res = client.Post("/v2/models/echo/infer", kEcho);
  EXPECT_EQ(res.status, 401) << res.body;
  EXPECT_EQ(res.headers["www-authenticate"], "Bearer");
  res = client.Post("/v2/models/echo/infer", kEcho, {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(res.status, 403) << res.body;
  EXPECT_EQ(client.Post("/v2/models/echo/infer", kEcho, inference).status, 200);
  EXPECT_EQ(client.Post("/v2/models/echo/infer", kEcho, admin).status, 200);  // admin may infer
  res = client.Request("GET", "/v1/models");
  EXPECT_EQ(res.status, 401);
  EXPECT_EQ(Parse(res)["error"]["type"], "authentication_error");
  EXPECT_EQ(client.Request("GET", "/metrics", "", inference).status, 200);

  // Changing the served set takes the admin key.
  EXPECT_EQ(client.Post("/v2/repository/reload", "{}").status, 401);
  EXPECT_EQ(client.Post("/v2/repository/reload", "{}", inference).status, 403);
  EXPECT_EQ(client.Post("/v2/repository/reload", "{}", admin).status, 200);
  EXPECT_EQ(client.Post("/v2/repository/models/echo/unload", "{}", inference).status, 403);
  EXPECT_EQ(client.Post("/v2/repository/index", "{}", inference).status, 200);

  // Bodies over max_request_mb: 413 naming the limit.
  HttpClient big(server.port());
  res = big.Post("/v2/models/echo/infer", std::string(2 << 20, ' '), inference);
  EXPECT_EQ(res.status, 413);
  EXPECT_THAT(res.body, HasSubstr("max_request_mb"));

  // CORS: only the configured origin.
  res = client.Request("OPTIONS", "/v2/models/echo/infer", "",
                       {{"Origin", "https://app.example"},
                        {"Access-Control-Request-Method", "POST"},
                        {"Access-Control-Request-Headers", "authorization, content-type"}});
  EXPECT_EQ(res.status, 204);
  EXPECT_EQ(res.headers["access-control-allow-origin"], "https://app.example");
  EXPECT_THAT(res.headers["access-control-allow-headers"], HasSubstr("authorization"));
  res = client.Request("OPTIONS", "/v2/models/echo/infer", "",
                       {{"Origin", "https://evil.example"},
                        {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(res.status, 403);
  EXPECT_EQ(res.headers.count("access-control-allow-origin"), 0u);
  auto with_origin = inference;
  with_origin["Origin"] = "https://app.example";
  res = client.Post("/v2/models/echo/infer", kEcho, with_origin);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.headers["access-control-allow-origin"], "https://app.example");
  with_origin["Origin"] = "https://evil.example";
  res = client.Post("/v2/models/echo/infer", kEcho, with_origin);
  EXPECT_EQ(res.headers.count("access-control-allow-origin"), 0u);
}

TEST(GuardedApiTest, ConnectionAndInFlightLimitsAnswer503WithRetryAfter) {
  Server server(GuardedConfig("max_connections: 2, max_in_flight: 1"));
  ASSERT_TRUE(server.Start()) << server.Log();
  const std::map<std::string, std::string> key = {{"Authorization", "Bearer inference-key"}};
  // One slow request (300 ms) in flight; a second meanwhile is refused.
  HttpClient first(server.port());
  auto slow = std::async(std::launch::async,
                         [&] { return first.Post("/v2/models/echo/infer", kEcho, key); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  HttpClient second(server.port());
  auto res = second.Post("/v2/models/echo/infer", kEcho, key);
  EXPECT_EQ(res.status, 503) << res.body;
  EXPECT_EQ(res.headers["retry-after"], "1");
  EXPECT_THAT(res.body, HasSubstr("max_in_flight"));
  EXPECT_EQ(slow.get().status, 200);  // nothing accepted is lost
  // Two connections open; a third is answered 503 and closed.
  HttpClient third(server.port());
  res = third.Post("/v2/models/echo/infer", kEcho, key);
  EXPECT_EQ(res.status, 503) << res.body;
  EXPECT_THAT(res.body, HasSubstr("max_connections"));
  EXPECT_EQ(res.headers["retry-after"], "1");
  EXPECT_EQ(second.Post("/v2/models/echo/infer", kEcho, key).status, 200);
}

}  // namespace
}  // namespace mmserve
