// LlamaEncoder: the execution state of one worker for the embed and rerank tasks — its own
// llama_context and batch, used only by that worker's thread.
#pragma once

#include <llama.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "backend/llama/llama_options.h"

namespace mmserve {

struct LlamaModelDeleter {
  void operator()(llama_model* m) const { llama_model_free(m); }
};
struct LlamaContextDeleter {
  void operator()(llama_context* c) const { llama_free(c); }
};
using LlamaModelPtr = std::unique_ptr<llama_model, LlamaModelDeleter>;
using LlamaContextPtr = std::unique_ptr<llama_context, LlamaContextDeleter>;

// What llama.cpp calls back during one instance's decodes. Allocated before the context that
// points at it; `instance` is set by the instance.
//  - The abort callback, between two nodes of the compute graph, inside the compute threads'
//    parallel region: true once the watchdog aborted the instance.
//  - The eval callback, at the graph's cuts (after each layer's attention, FFN up projection
//    and FFN), outside that region, and only when a more important model is loaded: where the
//    instance gives way to more important models (Instance::yield_point()), parking its
//    compute threads first. Pausing inside the region instead would leave the
//    other compute threads of the team waiting at a barrier, counted by OpenMP as busy.
struct LlamaHooks {
  Instance* instance = nullptr;
  std::atomic<bool> aborted{false};
  // Points `params` at this object's callbacks.
  void Attach(llama_context_params& params);
};

// Held while llama.cpp allocates a model's weight buffers or a context's buffers: a load then
// advises huge pages for its own weights only, not for a context allocated meanwhile, whose
// mostly untouched buffers would grow in 2 MiB steps (llama_backend.cc).
std::unique_lock<std::mutex> LockLlamaAllocations();

// One instance's llama_context and the hooks it calls. An instance idle for long releases the
// context (its KV cache, its graph's metadata: Instance::Release) and acquires it again, made
// with the same parameters and hooks, at its next execution. Used by the instance's worker
// thread only, except hooks(), which the watchdog reaches from its own (Instance::Abort).
class LlamaContext {
 public:
  // llama.cpp's defaults, the thread count from `options`, no perf counters, then whatever
  // `configure` sets; created under the allocation lock. Internal when llama.cpp refuses.
  static Result<LlamaContext> Create(const llama_model* model, const LlamaOptions& options,
                                     const std::function<void(llama_context_params&)>& configure);
  // The context, made again first if it was released; Internal when llama.cpp refuses.
  Result<llama_context*> Acquire();
  // Frees the context until the next Acquire(); its memory goes back to the system. False when
  // it was already released.
  bool Release();
  // Null while released.
  llama_context* get() const { return context_.get(); }
  LlamaHooks& hooks() const { return *hooks_; }

 private:
  LlamaContext(const llama_model* model, const llama_context_params& params);

  const llama_model* model_;
  llama_context_params params_;        // points at *hooks_
  std::unique_ptr<LlamaHooks> hooks_;  // before the context, which calls it
  LlamaContextPtr context_;
};

// params.idle_context_ms as Instance::release_after(): nullopt when -1 (never).
std::optional<std::chrono::milliseconds> IdleContextRelease(const LlamaOptions& options);

// Gives back the calling thread's OpenMP compute threads (they start again at its next
// decode). A no-op in a build without OpenMP.
void ReleaseComputeThreads();

// The text of `token` (special tokens rendered), however long.
std::string TokenPiece(const llama_vocab* vocab, llama_token token);

// Decode counters shared by a session's instances, for stats and tests.
struct LlamaStats {
  std::atomic<uint64_t> decodes{0};
  std::atomic<uint64_t> sequences{0};
  std::atomic<uint64_t> tokens{0};
  std::atomic<int64_t> contexts{0};           // live encoders and generators (a context each)
  std::atomic<uint64_t> context_releases{0};  // contexts an idle instance freed (Release)
  std::atomic<uint64_t> generated_tokens{0};  // generate: tokens sampled
  std::atomic<uint64_t> reused_prompt_tokens{0};  // generate: prompt tokens a cache held
  AtomicHistogram time_to_first_token;        // generate: arrival → first token, per sequence
  AtomicHistogram time_per_output_token;      // generate: each later token's gap to the last
};

enum class EncoderTask { kEmbed, kRerank };

class LlamaEncoder final : public Instance {
 public:
  // `model` and `stats` are not owned and outlive the encoder.
  static Result<std::unique_ptr<LlamaEncoder>> Create(const llama_model* model, EncoderTask task,
                                                      const LlamaOptions& options,
                                                      LlamaStats& stats);
  ~LlamaEncoder() override;

  Status Execute(Execution& execution) override;
  bool Abort() override;
  void Park() override { ReleaseComputeThreads(); }
  void Release() override;
  std::optional<std::chrono::milliseconds> release_after() const override {
    return IdleContextRelease(options_);
  }

  // The longest input (in tokens) one sequence may have.
  int max_tokens() const { return max_tokens_; }

 private:
  struct Sequence {
    size_t item;      // index in the batch
    size_t index;     // index of the text within its request
    std::vector<llama_token> tokens;
    bool sigmoid = false;    // rerank: squash this score into 0..1
    bool normalize = false;  // embed: L2-normalize this vector
    int width = 0;           // embed: the values kept (n_embd, or a request's `dimensions`)
  };

  LlamaEncoder(const llama_model* model, EncoderTask task, LlamaOptions options,
               LlamaStats& stats, LlamaContext context);
  std::vector<llama_token> Tokenize(std::string_view text, bool add_special) const;
  Result<int> Width(const InferRequest& request) const;
  // Tokenizes one request's texts into sequences; an error fails that request only.
  Status Prepare(size_t item, const InferRequest& request, std::vector<Sequence>& out,
                 std::vector<uint8_t>& truncated) const;
  // Fits `tokens` into max_tokens(): truncates (keeping the final special token) when allowed.
  Status Fit(std::vector<llama_token>& tokens, bool truncate, const std::string& what,
             bool& was_truncated) const;
  // Decodes sequences [begin, end) as one batch; writes one output row per sequence.
  Status Decode(const std::vector<Sequence>& seqs, size_t begin, size_t end,
                std::vector<float>& rows);
  // llama.cpp gives an encoder's context an output buffer with room for n_vocab logits per
  // token of the largest batch so far (250 MB for a full 2048-token bert-base batch) and
  // clears it, but a pooled encoder never computes logits: after the buffer was (re)allocated
  // for `n_tokens`, its logits part goes back to the system, still reading as zeros.
  void ReleaseUnusedLogits(int n_tokens);

  const llama_model* model_;
  const llama_vocab* vocab_;
  const EncoderTask task_;
  const LlamaOptions options_;
  LlamaStats& stats_;
  LlamaContext context_;
  llama_batch batch_;
  int n_embd_;
  int row_width_;   // floats written per sequence: n_embd (embed) or 1 (rerank)
  int max_tokens_;
  int n_batch_;
  int n_seq_max_;
  const float* logits_seen_ = nullptr;  // the logits buffer ReleaseUnusedLogits last saw
};

}  // namespace mmserve
