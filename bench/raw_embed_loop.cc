// raw_embed_loop: the engine's limit for P1 and P12 — llama.cpp called directly, no server: the
// texts tokenized once, packed into decodes (one sequence each, at most `batch` sequences and
// `n-batch` tokens per llama_decode), pooled and L2-normalized, in a loop for a fixed time.
// Prints one JSON line with embeddings/s and tokens/s.
//
//   raw_embed_loop --model bert-base.gguf --text "..." --batch 64 --threads 2 --seconds 15
//       (P1: `batch` copies of one text per decode)
//   raw_embed_loop --model bert-base.gguf --texts-file chunks.txt --batch 64 --n-batch 2048
//       (P12: one text per line, taken in turn)
#include <llama.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  CLI::App app{"raw batched llama.cpp embedding loop"};
  std::string model_path, text, texts_file;
  int batch_size = 64, threads = 2, n_batch_arg = 0;
  double seconds = 10, warmup = 2;
  app.add_option("--model", model_path)->required();
  auto* one = app.add_option("--text", text);
  app.add_option("--texts-file", texts_file)->excludes(one);
  app.add_option("--n-batch", n_batch_arg, "tokens per decode (default: all the copies of --text)");
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
  auto tokenize = [&](const std::string& t) {
    std::vector<llama_token> tokens(t.size() + 8);
    tokens.resize(static_cast<size_t>(llama_tokenize(vocab, t.data(), static_cast<int32_t>(t.size()),
                                                     tokens.data(), static_cast<int32_t>(tokens.size()),
                                                     true, true)));
    return tokens;
  };
  std::vector<std::vector<llama_token>> texts;
  if (!texts_file.empty()) {
    std::ifstream in(texts_file);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) texts.push_back(tokenize(line));
    }
  } else {
    texts.assign(static_cast<size_t>(batch_size), tokenize(text));
  }
  if (texts.empty()) return 1;
  size_t longest = 0;
  for (const auto& t : texts) longest = std::max(longest, t.size());
  llama_context_params cp = llama_context_default_params();
  const int n_batch = n_batch_arg > 0 ? n_batch_arg
                                      : static_cast<int>(texts[0].size()) * batch_size;
  if (static_cast<int>(longest) > n_batch) return 1;
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
  int64_t embeddings = 0, decoded = 0;
  size_t next = 0;  // the next text to pack
  auto start = Clock::now();
  bool measuring = false;
  while (true) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (!measuring && elapsed >= warmup) {
      measuring = true;
      start = Clock::now();
      embeddings = decoded = 0;
      continue;
    }
    if (measuring && elapsed >= seconds) break;
    batch.n_tokens = 0;
    int seqs = 0;
    while (seqs < batch_size &&
           batch.n_tokens + static_cast<int>(texts[next].size()) <= n_batch) {
      const auto& tokens = texts[next];
      for (size_t i = 0; i < tokens.size(); ++i) {
        const int n = batch.n_tokens++;
        batch.token[n] = tokens[i];
        batch.pos[n] = static_cast<llama_pos>(i);
        batch.n_seq_id[n] = 1;
        batch.seq_id[n][0] = seqs;
        batch.logits[n] = true;
      }
      ++seqs;
      next = (next + 1) % texts.size();
    }
    llama_memory_clear(llama_get_memory(ctx), true);
    if (llama_decode(ctx, batch) != 0) return 1;
    for (int s = 0; s < seqs; ++s) {
      const float* e = llama_get_embeddings_seq(ctx, s);
      double sum = 0;
      for (int i = 0; i < n_embd; ++i) sum += e[i] * e[i];
      const float norm = static_cast<float>(1.0 / std::sqrt(sum));
      for (int i = 0; i < n_embd; ++i) out[static_cast<size_t>(i)] = e[i] * norm;
    }
    embeddings += seqs;
    decoded += batch.n_tokens;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << nlohmann::json{{"embeddings", embeddings}, {"seconds", elapsed},
                              {"rps", static_cast<double>(embeddings) / elapsed},
                              {"tokens_per_s", static_cast<double>(decoded) / elapsed},
                              {"batch", batch_size}, {"tokens_per_text", texts[0].size()}}
                   .dump()
            << std::endl;
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
