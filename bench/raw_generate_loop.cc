// raw_generate_loop: the engine's limit for P2's single stream — llama.cpp called directly, no
// server: the prompt decoded, then `tokens` greedy tokens one decode each (argmax of the logits,
// no sampler chain), the KV cache cleared, again, for a fixed time. Prints one JSON line with
// generated tokens/s and requests (prompt + tokens) per second.
//
//   raw_generate_loop --model llama-base.gguf --prompt "..." --tokens 32 --threads 2 --seconds 15
#include <llama.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  CLI::App app{"raw llama.cpp greedy generation loop, one sequence"};
  std::string model_path, prompt;
  int n_tokens = 32, threads = 2;
  double seconds = 10, warmup = 2;
  app.add_option("--model", model_path)->required();
  app.add_option("--prompt", prompt)->required();
  app.add_option("--tokens", n_tokens);
  app.add_option("--threads", threads);
  app.add_option("--seconds", seconds);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(model_path.c_str(), llama_model_default_params());
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> tokens(prompt.size() + 8);
  tokens.resize(static_cast<size_t>(llama_tokenize(vocab, prompt.data(), static_cast<int32_t>(prompt.size()),
                                                   tokens.data(), static_cast<int32_t>(tokens.size()),
                                                   true, true)));
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = cp.n_ubatch = 512;
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  const int n_vocab = llama_vocab_n_tokens(vocab);

  using Clock = std::chrono::steady_clock;
  int64_t generated = 0, requests = 0;
  auto start = Clock::now();
  bool measuring = false;
  while (true) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (!measuring && elapsed >= warmup) {
      measuring = true;
      start = Clock::now();
      generated = requests = 0;
      continue;
    }
    if (measuring && elapsed >= seconds) break;
    llama_memory_clear(llama_get_memory(ctx), true);
    std::vector<llama_token> prompt_tokens = tokens;
    llama_batch batch = llama_batch_get_one(prompt_tokens.data(), static_cast<int32_t>(prompt_tokens.size()));
    for (int i = 0; i < n_tokens; ++i) {
      if (llama_decode(ctx, batch) != 0) return 1;
      const float* logits = llama_get_logits_ith(ctx, -1);
      llama_token next = static_cast<llama_token>(std::max_element(logits, logits + n_vocab) - logits);
      prompt_tokens.assign(1, next);
      batch = llama_batch_get_one(prompt_tokens.data(), 1);
      ++generated;
    }
    ++requests;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << nlohmann::json{{"tokens", generated}, {"seconds", elapsed},
                              {"tokens_per_s", static_cast<double>(generated) / elapsed},
                              {"rps", static_cast<double>(requests) / elapsed},
                              {"prompt_tokens", tokens.size()}}
                   .dump()
            << std::endl;
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
