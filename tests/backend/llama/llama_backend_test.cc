// The llama backend on the generated tiny GGUF models, through the real service and scheduler.
#include "backend/llama/llama_backend.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/identity/identity_backend.h"
#include "backend/llama/llama_options.h"
#include "config/config_parser.h"
#include "runtime/ggml_runtime.h"
#include "runtime/host_runtime.h"
#include "service/inference_service.h"
#include "testing/models.h"
#include "testing/probe_child.h"
#include "testing/service_util.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using testing::Submit;

using ::testing::HasSubstr;
using testing::GeneratedModel;

std::string Texts(const std::vector<std::string>& texts) {
  std::string data;
  for (const auto& t : texts) Tensor::AppendBytesElement(data, t);
  return data;
}

class LlamaBackendTest : public ::testing::Test {
 protected:
  LlamaBackendTest() {
    backends_.Register(std::make_unique<IdentityBackend>(host_));
    backends_.Register(std::make_unique<LlamaBackend>(ggml_));
  }

  std::unique_ptr<InferenceService> Start(const std::string& yaml) {
    auto config = ParseConfig(yaml, dir_.Write("m.yaml", yaml).string(), backends_);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    auto service = std::make_unique<InferenceService>(std::move(*config), backends_, guard_);
    service->LoadStartupModels();
    return service;
  }


  static std::unique_ptr<InferRequest> Embed(const std::vector<std::string>& texts,
                                             bool truncate = false) {
    auto r = std::make_unique<InferRequest>();
    r->model_name = "embedder";
    r->inputs.emplace_back("TEXT", DataType::kBytes, Shape{static_cast<int64_t>(texts.size())},
                           Texts(texts));
    if (truncate) r->parameters["truncate"] = true;
    return r;
  }

  static std::vector<float> Floats(const Tensor& t) {
    std::vector<float> v(t.size_bytes() / 4);
    std::memcpy(v.data(), t.data().data(), t.size_bytes());
    return v;
  }

  HostRuntime host_;
  GgmlRuntime ggml_;
  BackendRegistry backends_;
  RuntimeGuard guard_;
  testing::TempDir dir_;
};

std::string EmbedderYaml(const std::string& extra = "") {
  return "models:\n  - name: embedder\n    path: " + GeneratedModel("bert-tiny.gguf") +
         "\n    task: embed\n    max_batch: 64\n" + extra;
}

TEST_F(LlamaBackendTest, EmbeddingsAreNormalizedVectorsOfTheModelWidth) {
  auto service = Start(EmbedderYaml());
  auto info = service->GetModel("embedder");
  ASSERT_EQ(info->state, ModelState::kReady) << info->reason;
  EXPECT_EQ(info->signature.outputs[0].shape, (Shape{-1, 64}));
  auto result = Submit(*service, Embed({"hello world", "a second, longer text"})).get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const Tensor& e = result->outputs[0];
  ASSERT_EQ(e.shape(), (Shape{2, 64}));
  auto v = Floats(e);
  for (int row = 0; row < 2; ++row) {
    double norm = 0;
    for (int i = 0; i < 64; ++i) norm += v[row * 64 + i] * v[row * 64 + i];
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  EXPECT_NE(v[0], v[64]) << "different texts, different vectors";
  EXPECT_EQ(guard_.Describe(), "ggml(owned) ggml:0") << "llama's backend init went through the guard";
}

TEST_F(LlamaBackendTest, ConcurrentRequestsShareDecodes) {
  auto service = Start(EmbedderYaml());
  std::vector<std::future<Result<InferResponse>>> results;
  for (int i = 0; i < 64; ++i) {
    results.push_back(Submit(*service, Embed({"request number " + std::to_string(i)})));
  }
  for (auto& r : results) ASSERT_TRUE(r.get().ok());
  auto counters = service->GetModel("embedder")->counters;
  ASSERT_GT(counters["decodes"], 0);
  EXPECT_EQ(counters["sequences"], 64);
  EXPECT_GE(static_cast<double>(counters["sequences"]) / counters["decodes"], 4.0)
      << counters["decodes"] << " decodes for 64 texts";
}

TEST_F(LlamaBackendTest, TheWatchdogAbortsAnOverrunningDecodeAndTheWorkerStartsAFreshContext) {
  auto service = Start(EmbedderYaml("    watchdog_margin_ms: 1\n"
                                    "    breaker: {failures: 5, cooldown_ms: 50}\n"));
  std::string long_text;
  for (int i = 0; i < 500; ++i) long_text += "word ";
  // 128 texts of 502 tokens: dozens of decodes, far longer (> 1 s) than the 100 ms it may take.
  auto big = Embed(std::vector<std::string>(128, long_text));
  big->parameters["timeout"] = int64_t{100'000};
  auto result = Submit(*service, std::move(big)).get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("ran past the request's"));
  for (int i = 0; i < 1000 && service->GetModel("embedder")->stats->workers[0].restarts == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(service->GetModel("embedder")->stats->workers[0].restarts, 1);
  EXPECT_EQ(service->GetModel("embedder")->stats->watchdog_reports, 1);
  // After the cool-down a probe runs on the fresh context and puts the model back.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  auto probe = Submit(*service, Embed({"hello again"})).get();
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(service->GetModel("embedder")->state, ModelState::kReady);
}

TEST_F(LlamaBackendTest, ALowPriorityDecodePausesBetweenLayersWhileAMoreImportantModelWorks) {
  auto service = Start(EmbedderYaml("    priority: low\n") +
                       "  - name: urgent\n    backend: identity\n    priority: high\n"
                       "    params: {latency_ms: 1000, tensors: [{input: TEXT, output: EMBEDDING, "
                       "datatype: BYTES}]}\n");
  std::string long_text;
  for (int i = 0; i < 500; ++i) long_text += "word ";
  auto solo = Submit(*service, Embed({long_text})).get();
  ASSERT_TRUE(solo.ok()) << solo.status().ToString();
  // One execution of 128 long texts: dozens of decodes, over a second.
  auto big = Submit(*service, Embed(std::vector<std::string>(128, long_text)));
  const int64_t decodes_before = service->GetModel("embedder")->counters["decodes"];
  while (service->GetModel("embedder")->counters["decodes"] == decodes_before) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // past tokenizing, decoding
  }
  auto urgent_request = Embed({"now"});
  urgent_request->model_name = "urgent";
  auto urgent = Submit(*service, std::move(urgent_request)).get();
  ASSERT_TRUE(urgent.ok()) << urgent.status().ToString();
  const auto urgent_done = Clock::now();
  ASSERT_EQ(big.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto result = big.get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_GT(Clock::now(), urgent_done) << "the low-priority execution ended after the urgent one";

  // It was under way before the urgent request came, so it paused inside llama_decode: the
  // only place an execution in progress can wait is the engine's cut between layers.
  auto stats = *service->GetModel("embedder")->stats;
  EXPECT_GE(stats.yields, 1);
  // Three quarters of it: the pause begins at the first cut after the urgent request came,
  // which under a sanitizer on two busy cores took over 100 ms.
  EXPECT_GE(stats.yield_ns, 750'000'000) << "paused for most of the urgent model's 1000 ms";
  EXPECT_EQ(stats.watchdog_reports, 0);
  EXPECT_EQ(service->GetModel("urgent")->stats->yields, 0);
  // Pausing changes nothing in the results.
  auto paused = Floats(result->outputs[0]);
  auto alone = Floats(solo->outputs[0]);
  for (size_t i = 0; i < alone.size(); ++i) EXPECT_NEAR(paused[i], alone[i], 1e-4) << i;
}

// Threads of this process now.
size_t ThreadCount() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                           std::filesystem::directory_iterator()));
}

TEST_F(LlamaBackendTest, AnIdleWorkerGivesBackItsComputeThreads) {
  // Once a process holds more OpenMP threads than cores, every team sleeps at its barriers
  // instead of spinning: an idle model's threads would slow the busy ones.
#if defined(__clang__)
  GTEST_SKIP() << "clang links LLVM's OpenMP runtime beside the GNU one llama.cpp was built "
                  "with: the threads it keeps are not the ones counted here (build/ runs it)";
#endif
  auto service = Start(EmbedderYaml("    params: {n_threads: 3}\n"));
  const size_t idle = ThreadCount();
  ASSERT_TRUE(Submit(*service, Embed({"wake the compute threads"})).get().ok());
  EXPECT_EQ(ThreadCount(), idle + 2) << "the decode started a team of 3: the worker and 2 more";
  for (int i = 0; i < 100 && ThreadCount() != idle; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ThreadCount(), idle) << "parked after 200 ms without work";
  ASSERT_TRUE(Submit(*service, Embed({"and again"})).get().ok());
}

TEST_F(LlamaBackendTest, TooLongInputIsRejectedOrTruncatedOnRequest) {
  auto service = Start(EmbedderYaml());
  std::string long_text;
  for (int i = 0; i < 700; ++i) long_text += "word ";
  auto rejected = Submit(*service, Embed({"short", long_text})).get();
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(rejected.status().message()),
              HasSubstr("TEXT[1] has 702 tokens; this model accepts at most 512 per input"));

  auto truncated = Submit(*service, Embed({"short", long_text}, /*truncate=*/true)).get();
  ASSERT_TRUE(truncated.ok()) << truncated.status().ToString();
  EXPECT_EQ(truncated->outputs[1].name(), "TRUNCATED");
  EXPECT_EQ(truncated->outputs[1].data(), std::string("\0\1", 2));
}

TEST_F(LlamaBackendTest, RerankScoresOneScorePerDocument) {
  auto service = Start("models:\n  - name: reranker\n    path: " +
                       GeneratedModel("rerank-tiny.gguf") + "\n    task: rerank\n");
  auto r = std::make_unique<InferRequest>();
  r->model_name = "reranker";
  r->inputs.emplace_back("QUERY", DataType::kBytes, Shape{1}, Texts({"what is a cat"}));
  r->inputs.emplace_back("DOCUMENTS", DataType::kBytes, Shape{3},
                         Texts({"a cat is an animal", "stocks fell", "cats purr"}));
  auto result = Submit(*service, std::move(r)).get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->outputs[0].name(), "SCORES");
  auto scores = Floats(result->outputs[0]);
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_NE(scores[0], scores[1]);
}

TEST_F(LlamaBackendTest, HeadersAreCheckedBeforeAnythingLoadsAndTheTaskSuggested) {
  const auto corrupt = dir_.Write("corrupt.gguf", std::string("GGUF\3\0\0\0garbage", 15));
  const auto not_gguf = dir_.Write("weights.gguf", "this is not a model");
  const std::string yaml = EmbedderYaml(
      "  - name: corrupt\n    path: " + corrupt.string() + "\n    task: embed\n" +
      "  - name: not_gguf\n    path: " + not_gguf.string() + "\n    task: embed\n" +
      "  - name: headless\n    path: " + GeneratedModel("bert-tiny.gguf") + "\n    task: rerank\n" +
      "  - name: chatty_reranker\n    path: " + GeneratedModel("rerank-tiny.gguf") +
      "\n    task: generate\n");
  auto config = ParseConfig(yaml, dir_.Write("m.yaml", yaml).string(), backends_);
  ASSERT_FALSE(config.ok());
  const std::string errors(config.status().message());
  EXPECT_THAT(errors, HasSubstr("4 configuration errors"));
  EXPECT_THAT(errors, HasSubstr("models[1].path: expected a readable GGUF file, found"));
  EXPECT_THAT(errors, HasSubstr("is a corrupt GGUF file"));
  EXPECT_THAT(errors, HasSubstr("is not a GGUF file"));
  EXPECT_THAT(errors, HasSubstr("models[3].task: expected a task 'bert-tiny.gguf' (architecture "
                                "'bert') can do: rerank needs a classification head"));
  EXPECT_THAT(errors, HasSubstr("(use task: embed)"));
  EXPECT_THAT(errors, HasSubstr("models[4].task: expected a task 'rerank-tiny.gguf' "
                                "(architecture 'bert', a classification head) can do: it is an "
                                "encoder, not a decoder, found \"generate\" (use task: rerank)"));
}

TEST_F(LlamaBackendTest, WarmUpDecodesOnEveryContextBeforeReady) {
  auto service = Start("models:\n"
                       "  - {name: e, path: " + GeneratedModel("bert-tiny.gguf") +
                       ", task: embed, thread_num: 2, warmup: 1}\n"
                       "  - name: g\n    path: " + GeneratedModel("llama-tiny.gguf") +
                       "\n    task: generate\n    warmup: 2\n"
                       "    params: {n_ctx: 256, n_parallel: 1}\n");
  auto e = service->GetModel("e");
  ASSERT_EQ(e->state, ModelState::kReady) << e->reason;
  EXPECT_EQ(e->counters["decodes"], 2) << "one per worker's context";
  EXPECT_EQ(e->stats->inference_count, 0);
  auto g = service->GetModel("g");
  ASSERT_EQ(g->state, ModelState::kReady) << g->reason;
  EXPECT_EQ(g->counters["generated_tokens"], 2) << "two warm-ups of one token";
}

TEST_F(LlamaBackendTest, WithoutATaskTheFileSaysWhichItIs) {
  const std::string yaml = "models:\n"
                           "  - {name: e, path: " + GeneratedModel("bert-tiny.gguf") + "}\n"
                           "  - {name: r, path: " + GeneratedModel("rerank-tiny.gguf") + "}\n"
                           "  - {name: g, path: " + GeneratedModel("llama-tiny.gguf") + "}\n";
  auto config = ParseConfig(yaml, dir_.Write("m.yaml", yaml).string(), backends_);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->models.size(), 3u);
  EXPECT_EQ(config->models[0].task, "embed");
  EXPECT_EQ(config->models[1].task, "rerank");
  EXPECT_EQ(config->models[2].task, "generate");
}

std::unique_ptr<InferRequest> Generate(const std::string& prompt, int max_tokens) {
  auto r = std::make_unique<InferRequest>();
  r->model_name = "llm";
  r->inputs.emplace_back("PROMPT", DataType::kBytes, Shape{1}, Texts({prompt}));
  r->parameters["max_tokens"] = int64_t{max_tokens};
  return r;
}

std::string LlmYaml(int slots) {
  return "models:\n  - name: llm\n    path: " + GeneratedModel("llama-tiny.gguf") +
         "\n    task: generate\n    params: {n_ctx: 256, n_parallel: " + std::to_string(slots) +
         ", n_batch: 64}\n";
}

TEST_F(LlamaBackendTest, ConcurrentGreedyGenerationsEqualTheirSoloRunsAndShareDecodes) {
  std::vector<std::string> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back("Story number " + std::to_string(i) + std::string(i * 7, '!'));
  }
  std::vector<std::string> alone;
  {
    auto service = Start(LlmYaml(1));
    for (const auto& p : prompts) {
      auto r = Submit(*service, Generate(p, 24)).get();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      alone.push_back(std::string(r->outputs[0].BytesElements()[0]));
    }
  }
  auto service = Start(LlmYaml(8));
  std::vector<std::future<Result<InferResponse>>> together;
  for (const auto& p : prompts) together.push_back(Submit(*service, Generate(p, 24)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = together[i].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->outputs[0].BytesElements()[0], alone[i]) << "prompt " << i;
    EXPECT_FALSE(alone[i].empty());
  }
  auto counters = service->GetModel("llm")->counters;
  EXPECT_GT(static_cast<double>(counters["sequences"]) / counters["decodes"], 1.0)
      << counters["sequences"] << " sampled sequences in " << counters["decodes"] << " decodes";
}

TEST_F(LlamaBackendTest, GenerationHonoursStopAndMaxTokens) {
  auto service = Start(LlmYaml(2));
  auto full = Submit(*service, Generate("Once upon a time", 12)).get();
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(std::get<int64_t>(full->parameters["completion_tokens"]), 12);
  EXPECT_EQ(std::get<std::string>(full->parameters["finish_reason"]), "length");
  const std::string text(full->outputs[0].BytesElements()[0]);
  ASSERT_GT(text.size(), 4u);
  auto stopped = Generate("Once upon a time", 12);
  stopped->parameters["stop"] = text.substr(3, 2);
  auto r = Submit(*service, std::move(stopped)).get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<std::string>(r->parameters["finish_reason"]), "stop");
  EXPECT_EQ(std::string(r->outputs[0].BytesElements()[0]), text.substr(0, text.find(text.substr(3, 2))));
  auto bad = Generate("x", 0);
  EXPECT_THAT(std::string(Submit(*service, std::move(bad)).get().status().message()),
              HasSubstr("max_tokens: expected an integer from 1 to"));
}

TEST_F(LlamaBackendTest, OnlyAGeneratorTakesAPromptCacheAndItsRoomIsInTheEstimate) {
  const std::string yaml = EmbedderYaml("    params: {prompt_cache_mb: 5}\n");
  auto config = ParseConfig(yaml, dir_.Write("e.yaml", yaml).string(), backends_);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("models[0].params.prompt_cache_mb: expected no prompt_cache_mb (only "
                        "task generate keeps prompt states), found it with task embed"));
  for (const auto& [params, cache] : std::vector<std::pair<std::string, std::string>>{
           {"", "prompt cache 1 MiB"}, {", prompt_cache_mb: 7", "prompt cache 7 MiB"}}) {
    const std::string llm = "models:\n  - name: llm\n    path: " +
                            GeneratedModel("llama-tiny.gguf") +
                            "\n    task: generate\n    params: {n_ctx: 1024, n_parallel: 1" +
                            params + "}\n";
    auto parsed = ParseConfig(llm, dir_.Write("g.yaml", llm).string(), backends_);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto estimate = (*backends_.Find("llama"))->Estimate(parsed->models[0]);
    ASSERT_TRUE(estimate.ok());
    EXPECT_THAT(estimate->source, HasSubstr(cache));
  }
}

TEST_F(LlamaBackendTest, ParamsMaxTokensIsTheModelsDefaultAndOnlyGenerationTakesIt) {
  auto service = Start("models:\n  - name: llm\n    path: " + GeneratedModel("llama-tiny.gguf") +
                       "\n    task: generate\n    params: {n_ctx: 256, max_tokens: 5}\n");
  auto request = Generate("Once upon a time", 1);
  request->parameters.erase("max_tokens");  // the model's default applies
  auto r = Submit(*service, std::move(request)).get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::get<int64_t>(r->parameters["completion_tokens"]), 5);
  auto asked = Submit(*service, Generate("Once upon a time", 7)).get();  // the request's wins
  ASSERT_TRUE(asked.ok());
  EXPECT_EQ(std::get<int64_t>(asked->parameters["completion_tokens"]), 7);

  const std::string yaml = EmbedderYaml("    params: {max_tokens: 5}\n");
  auto config = ParseConfig(yaml, dir_.Write("e.yaml", yaml).string(), backends_);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("models[0].params.max_tokens: expected no max_tokens (only task generate "
                        "generates tokens), found it with task embed"));
}

TEST_F(LlamaBackendTest, ChatMessagesAreRenderedWithChatMLWhenTheModelHasNoTemplate) {
  auto service = Start(LlmYaml(1));
  auto chat = std::make_unique<InferRequest>();
  chat->model_name = "llm";
  chat->inputs.emplace_back("ROLES", DataType::kBytes, Shape{2}, Texts({"system", "user"}));
  chat->inputs.emplace_back("CONTENTS", DataType::kBytes, Shape{2}, Texts({"Be brief.", "Hi"}));
  chat->parameters["max_tokens"] = int64_t{8};
  auto from_chat = Submit(*service, std::move(chat)).get();
  ASSERT_TRUE(from_chat.ok()) << from_chat.status().ToString();
  // The same conversation rendered by hand in ChatML gives the same greedy continuation.
  auto by_hand = Submit(*service, Generate("<|im_start|>system\nBe brief.<|im_end|>\n"
                                           "<|im_start|>user\nHi<|im_end|>\n"
                                           "<|im_start|>assistant\n", 8)).get();
  ASSERT_TRUE(by_hand.ok());
  EXPECT_EQ(from_chat->outputs[0].BytesElements()[0], by_hand->outputs[0].BytesElements()[0]);
  EXPECT_EQ(from_chat->parameters["prompt_tokens"], by_hand->parameters["prompt_tokens"]);

  auto mismatched = std::make_unique<InferRequest>();
  mismatched->model_name = "llm";
  mismatched->inputs.emplace_back("ROLES", DataType::kBytes, Shape{1}, Texts({"user"}));
  EXPECT_THAT(std::string(Submit(*service, std::move(mismatched)).get().status().message()),
              HasSubstr("give either PROMPT, or chat messages as ROLES and CONTENTS"));
}

TEST_F(LlamaBackendTest, EstimateAndHeldBytesAreWithinAQuarterOfTheMeasuredFootprint) {
#if defined(MMSERVE_TEST_SANITIZED)
  GTEST_SKIP() << "ASan replaces the allocator whose counters measure the footprint; the "
                  "regular build runs this test";
#endif
  // Each task alone, so that the process's RSS growth over the load is that model's.
  for (const auto& [file, task] : std::vector<std::pair<std::string, std::string>>{
           {"bert-tiny.gguf", "embed"}, {"rerank-tiny.gguf", "rerank"},
           {"llama-tiny.gguf", "generate"}}) {
    auto service = Start("models:\n  - name: m\n    path: " + GeneratedModel(file) +
                         "\n    task: " + task + "\n");
    auto info = service->GetModel("m");
    ASSERT_EQ(info->state, ModelState::kReady) << info->reason;
    const double ratio = static_cast<double>(info->estimate.bytes) / info->measured_bytes;
    EXPECT_GT(ratio, 0.75) << task << ": estimate " << info->estimate.bytes << " measured "
                           << info->measured_bytes;
    EXPECT_LT(ratio, 1.25) << task << ": estimate " << info->estimate.bytes << " measured "
                           << info->measured_bytes;
    // What the budget counts while it is loaded: the weights and each context's buffers (the
    // weights alone were a third of a generator's).
    const double held = static_cast<double>(info->resident_bytes) / info->measured_bytes;
    EXPECT_GT(held, 0.75) << task << ": holds " << info->resident_bytes << " measured "
                          << info->measured_bytes;
    EXPECT_LT(held, 1.25) << task << ": holds " << info->resident_bytes << " measured "
                          << info->measured_bytes;
  }
}

// The "<key>: <n> kB" line of a /proc/self file, in kB (-1 when the kernel does not say).
long ProcKb(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return -1;
}

long AnonHugePagesKb() { return ProcKb("/proc/self/smaps_rollup", "AnonHugePages"); }
long RssKb() { return ProcKb("/proc/self/status", "VmRSS"); }

TEST_F(LlamaBackendTest, WeightsLandOnHugePagesOnlyWhenAskedTo) {
#if defined(MMSERVE_TEST_SANITIZED)
  GTEST_SKIP() << "the sanitizer's allocator maps memory its own way; the regular build runs this";
#endif
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string mode((std::istreambuf_iterator<char>(thp)), {});
  if (mode.find("[madvise]") == std::string::npos) {
    GTEST_SKIP() << "THP is not 'madvise' here: " << mode;
  }
  const std::string file = GeneratedModel("llama-tiny.gguf");
  const auto weights_kb = static_cast<long>(std::filesystem::file_size(file) / 1024);
  for (const bool huge : {false, true}) {
    const long before = AnonHugePagesKb();
    auto service = Start("models:\n  - name: m\n    path: " + file +
                         "\n    task: generate\n    params: {huge_pages: " +
                         (huge ? "true" : "false") + "}\n");
    ASSERT_EQ(service->GetModel("m")->state, ModelState::kReady);
    const long grown = AnonHugePagesKb() - before;
    if (huge) {
      // Most of them: huge pages cover the 2 MiB-aligned blocks of each weight buffer.
      EXPECT_GE(grown, weights_kb / 2) << "weights of " << weights_kb << " kB";
    } else {
      EXPECT_LT(grown, weights_kb / 4) << "weights of " << weights_kb << " kB";
    }
  }
}

// Whether the process maps `file` now (/proc/self/maps names it).
bool MapsFile(const std::string& file) {
  std::ifstream in("/proc/self/maps");
  for (std::string line; std::getline(in, line);) {
    if (line.size() >= file.size() && line.compare(line.size() - file.size(), file.size(), file) == 0) {
      return true;
    }
  }
  return false;
}

TEST_F(LlamaBackendTest, MappedWeightsAnswerBitwiseAsCopiedOnesAndOnlyMmapMapsTheFile) {
  const std::string file = std::filesystem::canonical(GeneratedModel("bert-tiny.gguf")).string();
  const std::vector<std::string> texts = {"hello world", "a second, longer text"};
  std::vector<float> answers[2];
  for (const bool mapped : {false, true}) {
    auto service = Start("models:\n  - name: embedder\n    path: " + file +
                         "\n    task: embed\n    params: {mmap: " + (mapped ? "true" : "false") +
                         "}\n");
    ASSERT_EQ(service->GetModel("embedder")->state, ModelState::kReady);
    EXPECT_EQ(MapsFile(file), mapped) << "mmap: " << mapped;
    auto result = Submit(*service, Embed(texts)).get();
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    answers[mapped] = Floats(result->outputs[0]);
    // The budget charges the same bytes whichever way the weights sit.
    EXPECT_GT(service->GetModel("embedder")->resident_bytes,
              static_cast<int64_t>(std::filesystem::file_size(file)) / 2);
  }
  EXPECT_FALSE(MapsFile(file)) << "unloading unmaps the file";
  ASSERT_EQ(answers[0].size(), answers[1].size());
  EXPECT_EQ(std::memcmp(answers[0].data(), answers[1].data(), answers[0].size() * sizeof(float)), 0);

  // huge_pages advises the buffers a copy fills: with mapped weights it would do nothing.
  const std::string yaml = EmbedderYaml("    params: {mmap: true, huge_pages: true}\n");
  auto config = ParseConfig(yaml, dir_.Write("e.yaml", yaml).string(), backends_);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("models[0].params.huge_pages: expected huge_pages only with mmap: false"));
}

TEST_F(LlamaBackendTest, ALargeBatchLeavesNoLogitsBufferResident) {
#if defined(MMSERVE_TEST_SANITIZED)
  GTEST_SKIP() << "the sanitizer's allocator keeps freed buffers resident; the regular build runs this";
#endif
  // 64 texts of ~26 tokens: decodes of 16 sequences, 416 tokens each, for which llama.cpp
  // sizes the output buffer at 416 x 30,522 vocabulary floats (50 MB) and clears it.
  auto service = Start(EmbedderYaml());
  ASSERT_TRUE(Submit(*service, Embed({"warm up"})).get().ok());
  const long before = RssKb();
  const std::vector<std::string> texts(
      64, "the quick brown fox jumps over the lazy dog and runs far away into the deep dark "
          "forest where nobody can find it again");
  auto result = Submit(*service, Embed(texts)).get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_LT(RssKb() - before, 16 * 1024) << "RSS " << before << " -> " << RssKb() << " kB";
}

// Waits (polling, at most 10 s) until model `name` counted `n` context releases.
bool AwaitReleases(InferenceService& service, const std::string& name, int64_t n) {
  for (int i = 0; i < 1000; ++i) {
    if (service.GetModel(name)->counters["context_releases"] >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_F(LlamaBackendTest, AnIdleEncoderFreesItsContextAndAnswersBitwiseAlikeWithANewOne) {
  // idle_context_ms 0: released as soon as the worker parks (200 ms idle).
  auto service = Start(EmbedderYaml("    params: {idle_context_ms: 0}\n"));
  auto first = Submit(*service, Embed({"the same text twice"})).get();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const int64_t held = service->GetModel("embedder")->resident_bytes;
  ASSERT_TRUE(AwaitReleases(*service, "embedder", 1)) << "no release after 10 s idle";
  EXPECT_EQ(service->GetModel("embedder")->resident_bytes, held)
      << "the budget keeps the released context's bytes: the model takes them again";
  auto again = Submit(*service, Embed({"the same text twice"})).get();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->outputs[0].data(), first->outputs[0].data()) << "bitwise, from a new context";
  ASSERT_TRUE(AwaitReleases(*service, "embedder", 2)) << "the new context is released in turn";
}

TEST_F(LlamaBackendTest, AnIdleGeneratorFreesItsContextAndGeneratesAlikeWithANewOne) {
  auto service = Start("models:\n  - name: llm\n    path: " + GeneratedModel("llama-tiny.gguf") +
                       "\n    task: generate\n    params: {n_ctx: 256, n_parallel: 2, "
                       "n_batch: 64, idle_context_ms: 0}\n");
  auto first = Submit(*service, Generate("Once upon a time", 16)).get();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(AwaitReleases(*service, "llm", 1)) << "no release after 10 s idle";
  auto again = Submit(*service, Generate("Once upon a time", 16)).get();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->outputs[0].BytesElements()[0], first->outputs[0].BytesElements()[0]);
}

TEST_F(LlamaBackendTest, IdleContextMsIsCheckedAtValidation) {
  const std::string yaml = EmbedderYaml("    params: {idle_context_ms: -2}\n");
  auto config = ParseConfig(yaml, dir_.Write("e.yaml", yaml).string(), backends_);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("models[0].params.idle_context_ms"));
  // By default an encoder frees its context after 30 s idle; a generator, whose context is
  // mostly a KV cache that costs seconds to make again, keeps it.
  ModelConfig model;
  ConfigErrors errors;
  model.task = "embed";
  EXPECT_EQ(ReadLlamaOptions(model, errors).idle_context_ms, 30000);
  model.task = "generate";
  EXPECT_EQ(ReadLlamaOptions(model, errors).idle_context_ms, -1);
  EXPECT_TRUE(errors.empty());
}

TEST_F(LlamaBackendTest, StreamedPiecesAddUpToTheTextAndAGoneClientFreesTheSlot) {
  auto service = Start(LlmYaml(1));  // one slot: a leaked slot would block the next request
  auto streamed = std::make_shared<std::string>();
  auto r = Generate("Once upon a time", 40);
  r->on_partial = [streamed](const InferResponse& p) {
    *streamed += std::string(p.outputs[0].BytesElements()[0]);
    return true;
  };
  auto full = Submit(*service, std::move(r)).get();
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(*streamed, std::string(full->outputs[0].BytesElements()[0]));

  int pieces = 0;
  auto gone = Generate("Once upon a time", 200);
  gone->on_partial = [&pieces](const InferResponse&) { return ++pieces < 3; };
  auto cancelled = Submit(*service, std::move(gone)).get();
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(pieces, 3);
  EXPECT_TRUE(Submit(*service, Generate("next", 4)).get().ok()) << "the slot was freed";
}

TEST_F(LlamaBackendTest, AGenerationNotStreamedStopsWhenItsClientLeaves) {
  auto service = Start(LlmYaml(1));
  auto asked = std::make_shared<std::atomic<int>>(0);
  auto r = Generate("Once upon a time", 200);
  // Asked once by the queue, then at every token: the client leaves after the third.
  r->cancelled = [asked] { return asked->fetch_add(1) >= 4; };
  auto cancelled = Submit(*service, std::move(r)).get();
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(asked->load(), 5);
  EXPECT_TRUE(Submit(*service, Generate("next", 4)).get().ok()) << "the slot was freed";
}

}  // namespace
}  // namespace mmserve

// In-process loads are probed in this binary started again (file_probe.h).
int main(int argc, char** argv) {
  return mmserve::testing::ProbeOrTest(
      argc, argv, [](int fd, int64_t arg) -> mmserve::Result<std::string> {
        mmserve::GgmlRuntime ggml;
        mmserve::RuntimeGuard guard;
        MMS_ASSIGN_OR_RETURN(mmserve::RuntimeLease lease, guard.Acquire(ggml, 0));
        return mmserve::LlamaBackend(ggml).ProbeFile(fd, arg);
      });
}
