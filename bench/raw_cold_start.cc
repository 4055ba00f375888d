// raw_cold_start: the engine's limit for P5 — llama.cpp called directly: load the model the way
// mmserve does (weights read into memory, not mapped), create an embedding context, embed one
// text, free everything; `rounds` times. Prints one JSON line with the median and each round.
// With --copies K (P6's peer): then loads 1 + K models that way, each with an embedding context
// sized like mmserve's default (n_batch 2048, 16 sequences) that embedded one text, all kept,
// and reports the resident memory each copy after the first added (rss_per_copy_kib).
//
//   raw_cold_start --model bert-base.gguf --text "..." --threads 2 --rounds 5 [--copies 4]
#include <llama.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace {

long RssKib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

struct Loaded {
  llama_model* model = nullptr;
  llama_context* context = nullptr;
};

// Loads the model the way mmserve does (weights read into memory, not mapped), creates an
// embedding context of `n_batch` tokens and `n_seq` sequences and embeds `text` once. Returns
// the model and context (the caller frees them), or nothing when llama.cpp fails.
std::optional<Loaded> LoadAndEmbed(const std::string& path, const std::string& text, int threads,
                                   uint32_t n_batch, uint32_t n_seq) {
  llama_model_params mp = llama_model_default_params();
  mp.load_mode = LLAMA_LOAD_MODE_NONE;
  mp.lazy_mode = LLAMA_LAZY_MODE_OFF;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) return std::nullopt;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> tokens(text.size() + 8);
  tokens.resize(static_cast<size_t>(
      llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                     static_cast<int32_t>(tokens.size()), true, true)));
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = n_batch;
  cp.n_seq_max = n_seq;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.embeddings = true;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  llama_batch batch = llama_batch_get_one(tokens.data(), static_cast<int32_t>(tokens.size()));
  if (!ctx || llama_decode(ctx, batch) != 0 || !llama_get_embeddings_seq(ctx, 0)) {
    if (ctx) llama_free(ctx);
    llama_model_free(model);
    return std::nullopt;
  }
  return Loaded{model, ctx};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"raw llama.cpp load + first embedding"};
  std::string model_path, text;
  int threads = 2, rounds = 5, copies = 0;
  app.add_option("--model", model_path)->required();
  app.add_option("--text", text)->required();
  app.add_option("--threads", threads);
  app.add_option("--rounds", rounds);
  app.add_option("--copies", copies, "then measure the memory of 1 + copies loaded models");
  CLI11_PARSE(app, argc, argv);

  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  using Clock = std::chrono::steady_clock;
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    const auto loaded = LoadAndEmbed(model_path, text, threads, 512, 1);
    if (!loaded) return 1;
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    llama_free(loaded->context);
    llama_model_free(loaded->model);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  nlohmann::json out{{"median_ms", sorted.empty() ? 0.0 : sorted[sorted.size() / 2]},
                     {"rounds_ms", ms}};

  // Sized like mmserve's default embedding context: 2048 tokens, 16 sequences.
  std::vector<Loaded> kept;
  long rss_first = 0;
  for (int c = 0; c < (copies > 0 ? copies + 1 : 0); ++c) {
    const auto loaded = LoadAndEmbed(model_path, text, threads, 2048, 16);
    if (!loaded) return 1;
    kept.push_back(*loaded);
    if (c == 0) rss_first = RssKib();
  }
  if (copies > 0) out["rss_per_copy_kib"] = (RssKib() - rss_first) / copies;
  for (const Loaded& l : kept) {
    llama_free(l.context);
    llama_model_free(l.model);
  }
  llama_backend_free();
  std::cout << out.dump() << std::endl;
  return 0;
}
