// raw_embed_loop: the engine's limit for P1 — llama.cpp called directly, no server: the same
// text tokenized once, `batch` copies of it decoded per llama_decode (one sequence each), pooled
// and L2-normalized, in a loop for a fixed time. Prints one JSON line with embeddings/s.
//
//   raw_embed_loop --model bert-base.gguf --text "..." --batch 64 --threads 2 --seconds 15
#include <llama.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  CLI::App app{"raw batched llama.cpp embedding loop"};
  std::string model_path, text;
  int batch_size = 64, threads = 2;
  double seconds = 10, warmup = 2;
  app.add_option("--model", model_path)->required();
  app.add_option("--text", text)->required();
  app.add_option("--batch", batch_size);
  app.add_option("--threads", threads);
  app.add_option("--seconds", seconds);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> tokens(text.size() + 8);
  tokens.resize(static_cast<size_t>(llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()),
                                                   tokens.data(), static_cast<int32_t>(tokens.size()),
                                                   true, true)));
  llama_context_params cp = llama_context_default_params();
  const int n_batch = static_cast<int>(tokens.size()) * batch_size;
  cp.n_ctx = cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n_batch);
  cp.n_seq_max = static_cast<uint32_t>(batch_size);
  cp.n_threads = cp.n_threads_batch = threads;
  cp.embeddings = true;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  llama_batch batch = llama_batch_init(n_batch, 0, 1);
  const int n_embd = llama_model_n_embd_out(model);
  std::vector<float> out(static_cast<size_t>(n_embd));

  using Clock = std::chrono::steady_clock;
  int64_t embeddings = 0;
  auto start = Clock::now();
  bool measuring = false;
  while (true) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (!measuring && elapsed >= warmup) {
      measuring = true;
      start = Clock::now();
      embeddings = 0;
      continue;
    }
    if (measuring && elapsed >= seconds) break;
    batch.n_tokens = 0;
    for (int s = 0; s < batch_size; ++s) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        const int n = batch.n_tokens++;
        batch.token[n] = tokens[i];
        batch.pos[n] = static_cast<llama_pos>(i);
        batch.n_seq_id[n] = 1;
        batch.seq_id[n][0] = s;
        batch.logits[n] = true;
      }
    }
    llama_memory_clear(llama_get_memory(ctx), true);
    if (llama_decode(ctx, batch) != 0) return 1;
    for (int s = 0; s < batch_size; ++s) {
      const float* e = llama_get_embeddings_seq(ctx, s);
      double sum = 0;
      for (int i = 0; i < n_embd; ++i) sum += e[i] * e[i];
      const float norm = static_cast<float>(1.0 / std::sqrt(sum));
      for (int i = 0; i < n_embd; ++i) out[static_cast<size_t>(i)] = e[i] * norm;
    }
    embeddings += batch_size;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << nlohmann::json{{"embeddings", embeddings}, {"seconds", elapsed},
                              {"rps", static_cast<double>(embeddings) / elapsed},
                              {"batch", batch_size}, {"tokens_per_text", tokens.size()}}
                   .dump()
            << std::endl;
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
