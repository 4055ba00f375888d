// A generator keeps each finished sequence's KV cells and the next prompt that shares their
// prefix decodes only the rest (issue #43, item 1): through the real binary, greedy answers are
// the same tokens with the cache and without it, for prompts sharing nothing, half, or all but
// the last words of an earlier one; in-process and isolated; cache_salt keeps tenants apart;
// usage.prompt_tokens_details.cached_tokens says what was reused. The host prompt cache (item
// 2): states saved when a slot is taken come back for a prompt that extends them, equal
// tokens; a full cache drops its oldest; a reload starts empty; a model that needs room takes
// it from the cache's reservation before anything is evicted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <thread>

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

// The host prompt cache (issue #43, item 2): one slot per model, so every new prompt takes the
// slot another one's cells fill; those cells are saved in host memory first and restored when a
// later prompt extends them.
class HostPromptCacheTest : public PromptCacheTest {
 protected:
  void SetUp() override {}
  void Serve(const std::string& yaml) {
    const std::string n = std::to_string(++servers_);  // each its own log: Start reads its port
    server_ = std::make_unique<testing::ServerProcess>(
        std::vector<std::string>{"serve", dir_.Write("m" + n + ".yaml", yaml).string(), "--port",
                                 "0", "--grpc-port", "-1", "--lock-dir", dir_.path().string()},
        dir_.path() / ("server" + n + ".log"));
    ASSERT_TRUE(server_->Start(std::chrono::seconds(120))) << server_->Log();
  }
  static std::string Model(const std::string& name, const std::string& isolation,
                           const std::string& params, const std::string& load = "startup") {
    return "  - name: " + name + "\n    path: " + testing::GeneratedModel("llama-tiny.gguf") +
           "\n    task: generate\n    isolation: " + isolation + "\n    load: " + load +
           "\n    timeout_ms: 600000\n    params: {n_ctx: 1024, n_parallel: 1" + params + "}\n";
  }
  json Stats(const std::string& model) {
    auto res = testing::HttpClient(server_->port()).Get("/v2/models/" + model + "/stats");
    EXPECT_EQ(res.status, 200) << res.body;
    const json out = json::parse(res.body, nullptr, false);
    if (!out.is_object() || !out.contains("model_stats")) return json::object();
    return out["model_stats"][0]["mmserve"];
  }
  int servers_ = 0;
  int64_t Counter(const std::string& model, const std::string& name) {
    const json counters = Stats(model)["counters"];
    return counters.contains(name) ? counters[name].get<int64_t>() : -1;
  }
};

TEST_F(HostPromptCacheTest, APromptWhoseSlotWasTakenIsRestoredFromHostMemory) {
  Serve("models:\n" + Model("llm-none", "none", "") + Model("llm-process", "process", ""));
  const std::string other = "A completely different opening about cats, dogs and the weather "
                            "in Lisbon, long enough to be worth a saved state of its own.";
  for (const std::string model : {"llm-none", "llm-process"}) {
    Complete(model, kBase);
    Complete(model, other);  // takes the one slot: kBase's cells go to host memory
    const auto restored = Complete(model, kBase + " Why?");
    EXPECT_GT(restored.second, 30) << model;
    Complete(model, other);
    const auto fresh = Complete(model, kBase + " Why?", {{"cache_prompt", false}});
    EXPECT_EQ(fresh.second, 0) << model;
    EXPECT_EQ(restored.first, fresh.first) << model;  // the same greedy tokens
    EXPECT_GE(Counter(model, "prompt_cache_hits"), 1) << model;
    EXPECT_GT(Counter(model, "prompt_cache_restored_tokens"), 30) << model;
    EXPECT_GT(Counter(model, "prompt_cache_bytes"), 0) << model;
    // By default as large as the KV cache: 1 slot x 1024 cells x 2 layers x 128 x K and V x F16.
    EXPECT_EQ(Counter(model, "prompt_cache_limit_bytes"), int64_t{1} << 20) << model;
  }
  // Another salt never restores it; the same salt does.
  Complete("llm-none", kBase, {{"cache_salt", "tenant-a"}});
  Complete("llm-none", other, {{"cache_salt", "tenant-a"}});
  EXPECT_EQ(Complete("llm-none", kBase + " More.", {{"cache_salt", "tenant-b"}}).second, 0);
  EXPECT_GT(Complete("llm-none", kBase + " More.", {{"cache_salt", "tenant-a"}}).second, 30);
  auto metrics = testing::HttpClient(server_->port()).Get("/metrics");
  EXPECT_THAT(metrics.body, ::testing::ContainsRegex(
                                "mmserve_prompt_cache_hits_total\\{model=\"llm-none\",version=\"1\"\\} [1-9]"));
  EXPECT_THAT(metrics.body, ::testing::HasSubstr("# TYPE mmserve_prompt_cache_bytes gauge"));
}

// A long system prompt shared by every question is saved to host memory once, by the first cut
// of the slot that holds it; the other slot restores it from that copy, and later questions on
// either slot neither save it again nor restore it again.
TEST_F(HostPromptCacheTest, ASharedSystemPromptIsSavedOnceAndRestoredIntoTheOtherSlot) {
  std::string yaml = "models:\n";
  for (const std::string isolation : {"none", "process"}) {
    yaml += "  - name: llm-" + isolation + "\n    path: " +
            testing::GeneratedModel("llama-tiny.gguf") + "\n    task: generate\n    isolation: " +
            isolation + "\n    timeout_ms: 600000\n    params: {n_ctx: 1024, n_parallel: 2}\n";
  }
  Serve(yaml);
  std::string system;
  for (int i = 0; i < 5; ++i) system += kBase + " ";  // ~250 tokens: a question is < 1/4 of it
  const auto question = [&](int i) { return system + "Question " + std::to_string(i) + ": why?"; };
  for (const std::string model : {"llm-none", "llm-process"}) {
    Complete(model, question(1));
    EXPECT_GT(Complete(model, question(2)).second, 200) << model;  // the same slot, cut once
    EXPECT_GT(Complete(model, question(3)).second, 200) << model;
    EXPECT_EQ(Counter(model, "prompt_cache_saved"), 1) << model;
    EXPECT_EQ(Counter(model, "prompt_cache_hits"), 0) << model;
    // Two questions at once: one keeps the slot that holds the prompt, the other restores it
    // into the empty slot from the one saved copy.
    for (int round = 0; round < 2; ++round) {
      json body = {{"model", model},
                   {"prompt", {question(10 + 2 * round), question(11 + 2 * round)}},
                   {"max_tokens", 24},
                   {"temperature", 0}};
      auto res = testing::HttpClient(server_->port()).Post("/v1/completions", body.dump());
      ASSERT_EQ(res.status, 200) << res.body;
      const json out = json::parse(res.body);
      EXPECT_GT(out["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 400)
          << model << ", round " << round;
    }
    EXPECT_EQ(Counter(model, "prompt_cache_saved"), 1) << model;
    EXPECT_EQ(Counter(model, "prompt_cache_hits"), 1) << model;  // the second round needs none
    EXPECT_GT(Counter(model, "prompt_cache_restored_tokens"), 200) << model;
  }
}

TEST_F(HostPromptCacheTest, AReloadedModelNeverRestoresTheStatesOfItsPredecessor) {
  const std::string other = "A completely different opening about cats, dogs and the weather "
                            "in Lisbon, long enough to be worth a saved state of its own.";
  Serve("models:\n" + Model("llm", "none", ""));
  Complete("llm", kBase);
  Complete("llm", other);  // kBase's state is in host memory now
  ASSERT_GT(Counter("llm", "prompt_cache_saved"), 0);
  // The same model with other params: a reload loads a new session, with a cache of its own.
  dir_.Write("m1.yaml", "models:\n" + Model("llm", "none", ", max_tokens: 20"));
  auto reload = testing::HttpClient(server_->port()).Post("/v2/repository/reload", "{}");
  EXPECT_EQ(reload.status, 200) << reload.body;
  EXPECT_THAT(reload.body, ::testing::HasSubstr("\"reloaded\":[\"llm v1\"]"));
  for (int i = 0; i < 600 && Stats("llm")["state"] != "READY"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Counter("llm", "prompt_cache_saved"), 0);
  EXPECT_EQ(Complete("llm", kBase + " Why?").second, 0);
  EXPECT_EQ(Counter("llm", "prompt_cache_hits"), 0);
}

TEST_F(HostPromptCacheTest, AFullCacheDropsItsOldestStates) {
  // About 1 KiB per token of llama-tiny: four of these prompts' states (~300 tokens each) do not
  // fit in 1 MiB.
  Serve("models:\n" + Model("llm", "none", ", prompt_cache_mb: 1"));
  std::string body;
  for (int i = 0; i < 5; ++i) body += kBase + " ";
  std::vector<std::string> prompts;
  for (int i = 0; i < 7; ++i) prompts.push_back("Topic " + std::to_string(i) + ": " + body);
  for (const auto& p : prompts) Complete("llm", p);
  EXPECT_GE(Counter("llm", "prompt_cache_evicted"), 2);
  EXPECT_LE(Counter("llm", "prompt_cache_bytes"), int64_t{1} << 20);
  EXPECT_EQ(Complete("llm", prompts[0] + " Why?").second, 0);  // the oldest went
  EXPECT_GT(Complete("llm", prompts[5] + " Why?").second, 200);
}

TEST_F(HostPromptCacheTest, AModelThatNeedsRoomTakesItFromTheCacheBeforeAnyEviction) {
  for (const std::string isolation : {"none", "process"}) {
    // First: what the generator holds with a 64 MiB cache (weights, context, the cache's room).
    Serve("models:\n" + Model("llm", isolation, ", prompt_cache_mb: 64"));
    const int64_t held = Stats("llm")["memory"]["resident_bytes"].get<int64_t>();
    const int64_t estimate = Stats("llm")["memory"]["estimate_bytes"].get<int64_t>();
    server_.reset();
    // Then a budget where another model fits only with half the cache's room given back.
    const int64_t mib = int64_t{1} << 20;
    const int64_t pool = (std::max(held, estimate) + mib - 1) / mib + 8;
    const int64_t big = pool - held / mib + 32;
    Serve("global: {memory_pool: " + std::to_string(pool) +
          ", preflight: {factor: 1.0, max_fill: 1.0}}\nmodels:\n" +
          Model("llm", isolation, ", prompt_cache_mb: 64") +
          "  - {name: big, backend: identity, load: on_demand, params: {memory_mb: " +
          std::to_string(big) + "}}\n");
    Complete("llm", kBase);
    auto res = testing::HttpClient(server_->port())
                   .Post("/v2/models/big/infer",
                         R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]})");
    EXPECT_EQ(res.status, 200) << isolation << ": " << res.body;
    EXPECT_EQ(Stats("llm")["state"], "READY") << isolation;  // not evicted
    auto devices = json::parse(testing::HttpClient(server_->port()).Get("/v2/devices").body);
    EXPECT_LE(devices["devices"][0]["used_bytes"].get<int64_t>(), pool * mib) << isolation;
    auto events = testing::HttpClient(server_->port()).Get("/v2/events").body;
    EXPECT_THAT(events, ::testing::HasSubstr("cache_shed")) << isolation;
    EXPECT_THAT(events, ::testing::Not(::testing::HasSubstr("evicted"))) << isolation;
    // The smaller cache still serves (and an isolated worker's counters come with an answer).
    EXPECT_GT(Complete("llm", kBase + " Why?").second, 30) << isolation;
    const int64_t limit = Counter("llm", "prompt_cache_limit_bytes");
    EXPECT_LT(limit, 64 * mib) << isolation;
    EXPECT_GE(limit, 0) << isolation;
    server_.reset();
  }
}

}  // namespace
}  // namespace mmserve
