// LlamaOptions: the llama backend's `params:`, read once at validation (errors collected) and
// again at load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.h"

namespace mmserve {

struct LlamaOptions {
  int n_ctx = 0;
  int n_parallel = 0;  // 0: 16 sequences per decode for embed/rerank, 4 slots for generate
  int n_batch = 0;  // 0: 2048 tokens per decode for embed/rerank, 512 for generate (prompt chunks)
  int n_threads = 0;
  std::string pooling = "model";
  bool normalize = true;
  bool truncate = false;
  bool sigmoid = false;
  // embed: the widths the model was trained to be cut to (Matryoshka representations), which a
  // request's `dimensions` may ask for: the vector's first d values, normalized again.
  std::vector<int> matryoshka_dims;
  std::string chat_template;  // generate: overrides the model's tokenizer.chat_template
  int max_tokens = 128;       // generate: tokens per request when the request sets none
  // generate: host memory for saved prompt states (prompt_cache.h); -1: as large as the KV cache
  int64_t prompt_cache_mb = 0;
  bool huge_pages = false;    // advise the weight buffers onto transparent huge pages
  bool mmap = false;          // map the weights from the file instead of copying them
  int64_t idle_context_ms = 30000;  // an instance idle this long frees its context; -1: never
                                    // (the default for generate)
};

LlamaOptions ReadLlamaOptions(const ModelConfig& model, ConfigErrors& errors);

// params.n_threads, or every core when it is 0.
int ThreadCount(const LlamaOptions& options);

}  // namespace mmserve
