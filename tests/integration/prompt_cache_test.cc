// A generator keeps each finished sequence's KV cells and the next prompt that shares their
// prefix decodes only the rest (issue #43, item 1): through the real binary, greedy answers are
// the same tokens with the cache and without it, for prompts sharing nothing, half, or all but
// the last words of an earlier one; in-process and isolated; cache_salt keeps tenants apart;
// usage.prompt_tokens_details.cached_tokens says what was reused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using nlohmann::json;

class PromptCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string yaml = "models:\n";
    for (const char* isolation : {"none", "process"}) {
      yaml += std::string("  - name: llm-") + isolation + "\n    path: " +
              testing::GeneratedModel("llama-tiny.gguf") + "\n    task: generate\n" +
              "    isolation: " + isolation + "\n    timeout_ms: 600000\n" +
              "    params: {n_ctx: 1024, n_parallel: 2}\n";
    }
    server_ = std::make_unique<testing::ServerProcess>(
        std::vector<std::string>{"serve", dir_.Write("m.yaml", yaml).string(), "--port", "0",
                                 "--grpc-port", "-1", "--lock-dir", dir_.path().string()},
        dir_.path() / "server.log");
    ASSERT_TRUE(server_->Start(std::chrono::seconds(120))) << server_->Log();
  }
  // One greedy completion: its text and how many prompt tokens were cached.
  std::pair<std::string, int> Complete(const std::string& model, const std::string& prompt,
                                       const json& extra = json::object()) {
    json body = {{"model", model}, {"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}};
    body.update(extra);
    auto res = testing::HttpClient(server_->port()).Post("/v1/completions", body.dump());
    EXPECT_EQ(res.status, 200) << res.body;
    const json out = json::parse(res.body, nullptr, false);
    if (!out.is_object() || !out.contains("usage")) return {"", -1};
    return {out["choices"][0]["text"].get<std::string>(),
            out["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>()};
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::ServerProcess> server_;
};

const std::string kBase =
    "Retrieval-augmented generation sends the same long system prompt with every question, "
    "followed by the passages a retriever found for it and then the question itself, so that "
    "most of every prompt is a prompt the server has seen before.";

TEST_F(PromptCacheTest, GreedyAnswersAreTheSameWithAndWithoutTheCache) {
  const std::vector<std::pair<std::string, std::string>> prompts = {
      {"0 %", "A completely different opening about cats, dogs and the weather in Lisbon."},
      {"50 %", kBase.substr(0, kBase.size() / 2) + " but then it goes somewhere else entirely."},
      {"99 %", kBase + " Why?"},
  };
  for (const std::string model : {"llm-none", "llm-process"}) {
    for (const auto& [share, prompt] : prompts) {
      Complete(model, kBase);  // both slots may hold it: the next request reuses one of them
      Complete(model, kBase);
      const auto cached = Complete(model, prompt);
      const auto fresh = Complete(model, prompt, {{"cache_prompt", false}});
      EXPECT_EQ(cached.first, fresh.first) << model << ", " << share;
      EXPECT_EQ(fresh.second, 0) << model << ", " << share;
      if (share == "0 %") {
        EXPECT_EQ(cached.second, 0) << model;
      } else {
        EXPECT_GT(cached.second, share == "99 %" ? 30 : 10) << model << ", " << share;
      }
    }
  }
}

TEST_F(PromptCacheTest, RequestsWithDifferentSaltsNeverShareACachedPrompt) {
  // Two slots: tenant a's prompt in one; b's same prompt finds no cache and takes the other.
  Complete("llm-none", kBase, {{"cache_salt", "tenant-a"}});
  EXPECT_EQ(Complete("llm-none", kBase + " More.", {{"cache_salt", "tenant-b"}}).second, 0);
  EXPECT_GT(Complete("llm-none", kBase + " Again.", {{"cache_salt", "tenant-a"}}).second, 30);
  EXPECT_EQ(Complete("llm-none", kBase + " More.").second, 0);  // no salt is a salt of its own
  // Counted for Prometheus.
  auto metrics = testing::HttpClient(server_->port()).Get("/metrics");
  EXPECT_THAT(metrics.body, ::testing::ContainsRegex(
                                "mmserve_prompt_tokens_reused_total\\{model=\"llm-none\",version=\"1\"\\} [1-9]"));
  auto bad = testing::HttpClient(server_->port())
                 .Post("/v1/completions", json{{"model", "llm-none"}, {"prompt", "x"},
                                               {"cache_salt", 7}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, ::testing::HasSubstr("cache_salt"));
}

}  // namespace
}  // namespace mmserve
