// LlamaGenerator: the continuous-batching instance of the generate task. One llama_context with
// one KV sequence per slot; each Step() builds one batch holding the next token of every
// generating sequence plus prompt chunks of admitted ones (up to n_batch tokens, so a long
// prompt never freezes running streams), decodes it once and samples per sequence.
//
//   request:  PROMPT (BYTES [1]), or chat messages as ROLES and CONTENTS (BYTES [-1] each),
//             rendered with params.chat_template, the model's tokenizer.chat_template, or ChatML;
//             parameters max_tokens, temperature, top_k, top_p, min_p, seed,
//             repeat_penalty, stop (a string); STOP (BYTES [-1], optional): more stop strings
//   response: TEXT (BYTES [1]); parameters prompt_tokens, completion_tokens, finish_reason
//             ("stop", "length")
//   streaming: each partial is the new text; text that may still become a stop string is
//             held back until it cannot, so a stop string is never streamed
#pragma once

#include <llama.h>

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/llama/llama_encoder.h"

namespace mmserve {

struct LlamaSamplerDeleter {
  void operator()(llama_sampler* s) const { llama_sampler_free(s); }
};
using LlamaSamplerPtr = std::unique_ptr<llama_sampler, LlamaSamplerDeleter>;

class LlamaGenerator final : public ContinuousInstance {
 public:
  // `model` and `stats` are not owned and outlive the generator.
  static Result<std::unique_ptr<LlamaGenerator>> Create(const llama_model* model,
                                                       const LlamaOptions& options,
                                                       LlamaStats& stats);
  ~LlamaGenerator() override;

  int free_slots() const override;
  void Admit(std::unique_ptr<InferRequest> request) override;
  bool idle() const override { return active_ == 0; }
  void Step() override;
  void CancelAll(const Status& status) override;
  bool Abort() override;
  void Park() override { ReleaseComputeThreads(); }
  // Called only while idle(): every sequence's KV cells were freed as it finished.
  void Release() override {
    if (context_.Release()) stats_.context_releases.fetch_add(1);
  }
  std::optional<std::chrono::milliseconds> release_after() const override {
    return IdleContextRelease(options_);
  }

 private:
  struct Slot {
    std::unique_ptr<InferRequest> request;  // null: free
    std::vector<llama_token> prompt;
    size_t prompt_done = 0;                 // prompt tokens already in the KV cache
    std::vector<llama_token> generated;
    std::string text;
    size_t streamed = 0;                    // bytes of `text` already sent as partials
    LlamaSamplerPtr sampler;
    int max_tokens = 0;
    std::vector<std::string> stops;         // generation ends before any of these
    int logits_index = -1;                  // batch row to sample from after this step's decode
    Clock::time_point last_token;           // when the latest token was sampled
  };

  LlamaGenerator(const llama_model* model, LlamaOptions options, LlamaStats& stats,
                 LlamaContext context);
  Status Prepare(Slot& slot);
  // Chat messages rendered with params.chat_template, the model's template, or ChatML.
  Result<std::string> RenderChat(const Tensor& roles, const Tensor& contents) const;
  void Finish(int seq, Result<InferResponse> result);
  void FinishOk(int seq, const std::string& reason);
  // Samples the next token of slot `seq`; returns false when the sequence finished.
  bool Sample(int seq);

  const llama_model* model_;
  const llama_vocab* vocab_;
  const LlamaOptions options_;
  LlamaStats& stats_;
  LlamaContext context_;
  llama_batch batch_;
  std::vector<Slot> slots_;
  int active_ = 0;
  int n_batch_;
  int n_ctx_seq_;
};

}  // namespace mmserve
