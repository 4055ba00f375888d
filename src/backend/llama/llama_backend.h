// The llama backend: GGUF models through llama.h, for three tasks —
//   embed     TEXT (BYTES [-1]) or TOKENS (BYTES [-1], each element one text's int32 LE token
//             ids) → EMBEDDING (FP32 [-1, n_embd]), TRUNCATED (BOOL [-1]); request
//             parameter normalize overrides params.normalize
//   rerank    QUERY (BYTES [1]), DOCUMENTS (BYTES [-1]) → SCORES (FP32 [-1]); request
//             parameter sigmoid overrides params.sigmoid
//   generate  PROMPT (BYTES [1]) or a chat (MESSAGES, TOOLS, ...) → TEXT (BYTES [1]) and for a chat
//             MESSAGE, continuous batching (llama_generator.h; templates and grammars:
//             llama_chat.h)
//   both take the request parameter truncate; every response has the parameter prompt_tokens
//   (tokens the request fed to the model)
// Texts from every request of a batch are packed into as few llama_decode calls as the token
// budget (n_batch) and the sequence limit (n_parallel) allow, one sequence per text, as TEI does.
//
//   params:
//     n_ctx: 0          # tokens of context per sequence; 0 = the model's training context
//     n_parallel: 0     # sequences per decode (embed/rerank, 0 = 16) or slots (generate, 0 = 4)
//     n_batch: 0        # tokens per decode, the token budget (0 = 2048 embed/rerank, 512 generate)
//     n_threads: 0      # 0 = every core
//     pooling: model    # model | mean | cls | last | rank
//     normalize: true   # embed: L2-normalize each vector
//     truncate: false   # too-long input: truncate (and flag it) instead of a 400
//     sigmoid: false    # rerank: squash scores into 0..1
//     matryoshka_dims: []  # embed: widths the model was trained to be cut to; a request's
//                       # `dimensions` may ask for one (the first d values, normalized again)
//     chat_template: "" # generate: a built-in name (llama3, ...), Jinja text, or a .jinja file
//                       # next to the model; default the GGUF's own template, else ChatML
//     max_tokens: 128   # generate: tokens per request when the request gives no max_tokens
//     huge_pages: false # weights on transparent huge pages (common/pages.h): +2.5 % decode
//                       # tokens/s for a 0.5B F16 model here, but on a VM whose balloon takes
//                       # back free 2 MiB blocks (this one) every cold load is ~10x slower
//                       # (2.5 s instead of 0.22 s for 254 MB); worth it on bare metal
//     mmap: false       # map the weights from the file (the page cache's) instead of copying
//                       # them: a reload after an eviction costs no read and no copy (llama-base
//                       # 3.7 s -> see P7); but the file must not be replaced in place while
//                       # loaded (a truncated mapping faults), and not with huge_pages
//     idle_context_ms: 30000  # a worker idle this long frees its llama.cpp context (graph
//                       # metadata, buffers, KV cache) and makes it again at its next request;
//                       # the budget keeps its bytes. -1 = never. Embed/rerank: 2.2 MiB of
//                       # bert-base for ~30 ms on the next request. Generate: -1 by default
//                       # (llama-base with 4 slots: 1 GiB freed, but 5.5 s to make it again)
//
// Sessions share the loaded weights; each worker thread gets its own llama_context.
#pragma once

#include "backend/backend.h"

namespace mmserve {

class LlamaBackend final : public Backend {
 public:
  // `runtime` (the GgmlRuntime) is not owned and outlives the backend.
  explicit LlamaBackend(Runtime& runtime) : runtime_(runtime) {}

  std::string name() const override { return "llama"; }
  std::vector<std::string> tasks() const override { return {"generate", "embed", "rerank"}; }
  bool RunsIsolated(const ModelConfig&) const override { return true; }
  // ggml's CPU compute threads are an OpenMP team in a build with OpenMP (GGML_OPENMP).
  bool RunsOpenMp(const ModelConfig&) const override {
#ifdef _OPENMP
    return true;
#else
    return false;
#endif
  }
  bool takes_tensors() const override { return false; }
  Runtime& runtime() override { return runtime_; }

  void Validate(ModelConfig& model, ConfigErrors& errors) const override;
  // Weights from the GGUF tensor table, plus per-instance context and compute buffers.
  Result<MemoryEstimate> Estimate(const ModelConfig& model) const override;
  // llama.cpp's loader over a GGUF file (mapped, on the CPU): the weights' bytes. LoadSession
  // loads a file in the server only after this survived the same file (file_probe.h).
  Result<std::string> ProbeFile(int fd, int64_t arg) const override;

 private:
  Result<std::unique_ptr<Session>> LoadSession(const ModelConfig& model,
                                               LoadProgress& progress) override;
  Runtime& runtime_;
};

}  // namespace mmserve
