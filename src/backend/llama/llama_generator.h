// LlamaGenerator: the continuous-batching instance of the generate task. One llama_context with
// one KV sequence per slot; each Step() builds one batch holding the next token of every
// generating sequence plus prompt chunks of admitted ones (up to n_batch tokens, so a long
// prompt never freezes running streams), decodes it once and samples per sequence.
//
//   request:  PROMPT (BYTES [1]), or a chat: MESSAGES (BYTES [1], OpenAI's messages as JSON) or
//             ROLES and CONTENTS (BYTES [-1] each), rendered with params.chat_template or the
//             model's own Jinja template (llama_chat.h); a chat may add TOOLS (BYTES [1], JSON)
//             and TEMPLATE_KWARGS (BYTES [1], a JSON object), and parameters tool_choice
//             (auto | none | required), tool_name (the named form), parallel_tool_calls,
//             reasoning_format; JSON_SCHEMA (BYTES [1]): the answer follows the schema (a
//             grammar); parameters max_tokens, temperature, top_k, top_p, min_p, seed,
//             repeat_penalty, stop (a string), render_only (answer the rendered prompt as
//             TEXT, generate nothing); STOP (BYTES [-1], optional): more stop strings
//   response: TEXT (BYTES [1]: the text generated); a chat adds MESSAGE (BYTES [1]: JSON
//             {content, reasoning_content?, tool_calls?}); parameters prompt_tokens,
//             completion_tokens, finish_reason ("stop", "length", "tool_calls")
//   streaming: each partial is the new text (TEXT), and for a chat the message's deltas
//             (DELTA, BYTES [-1]: JSON each); text that may still become a stop string is
//             held back until it cannot, so a stop string is never streamed
#pragma once

#include <llama.h>

#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "backend/llama/llama_chat.h"
#include "backend/llama/llama_encoder.h"
#include "backend/llama/llama_slots.h"
#include "backend/llama/prompt_cache.h"

namespace mmserve {

struct LlamaSamplerDeleter {
  void operator()(llama_sampler* s) const { llama_sampler_free(s); }
};
using LlamaSamplerPtr = std::unique_ptr<llama_sampler, LlamaSamplerDeleter>;

class LlamaGenerator final : public ContinuousInstance {
 public:
  // `model`, `stats` and `cache` (null: no host prompt cache) are not owned and outlive the
  // generator.
  static Result<std::unique_ptr<LlamaGenerator>> Create(const llama_model* model,
                                                       const LlamaOptions& options,
                                                       LlamaStats& stats,
                                                       PromptCache* cache = nullptr);
  ~LlamaGenerator() override;

  int free_slots() const override;
  void Admit(std::unique_ptr<InferRequest> request) override;
  bool idle() const override { return active_ == 0; }
  void Step() override;
  void CancelAll(const Status& status) override;
  bool Abort() override;
  void Park() override { ReleaseComputeThreads(); }
  // Called only while idle(): what the slots' cells hold goes to the host prompt cache first.
  void Release() override {
    reuse_.SaveAll();
    if (context_.Release()) stats_.context_releases.fetch_add(1);
    reuse_.ForgetAll();  // the KV cells went with the context
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
    LlamaSamplerPtr grammar;                // the answer's grammar (a schema, tool calls); or null
    std::unique_ptr<ChatReader> reader;     // a chat's answer read as a message; or null
    int top_k_only = 0;  // > 0: the chain keeps only the top k candidates by raw logit
    size_t reused = 0;            // prompt tokens whose KV cells an earlier request left
    size_t decoded_generated = 0; // generated tokens decoded into the KV cache
    bool in_batch = false;        // its last generated token is in this step's batch
    int max_tokens = 0;
    std::vector<std::string> stops;         // generation ends before any of these
    int logits_index = -1;                  // batch row to sample from after this step's decode
    Clock::time_point last_token;           // when the latest token was sampled
  };

  LlamaGenerator(const llama_model* model, LlamaOptions options, LlamaStats& stats,
                 PromptCache* cache, LlamaContext context,
                 std::unique_ptr<ChatTemplates> templates);
  Status Prepare(Slot& slot);
  // The prompt of the slot's request; chat messages rendered with the model's chat template.
  Status PlanPrompt(Slot& slot, std::string& prompt);
  // Ends the slot's request; `keep`: its KV cells stay for the next prompt that shares them.
  void Finish(int seq, Result<InferResponse> result, bool keep = false);
  void FinishOk(int seq, const std::string& reason);
  // A partial: `text` (the new text) and, for a chat, `deltas`; false when the client left
  // (the slot is then finished).
  bool SendDeltas(int seq, const std::vector<ChatDelta>& deltas, std::string_view text);
  Result<llama_token> NextToken(Slot& slot, int index);
  bool Allowed(Slot& slot, llama_token token);  // whether the slot's grammar takes `token` next
  std::optional<llama_token> FromBestAllowed(Slot& slot, const float* logits);
  llama_token_data_array FillCandidates(const float* logits);
  // Samples the next token of slot `seq`; returns false when the sequence finished.
  bool Sample(int seq);

  const llama_model* model_;
  const llama_vocab* vocab_;
  const LlamaOptions options_;
  LlamaStats& stats_;
  PromptCache* const cache_;  // not owned; null: none
  LlamaContext context_;
  std::unique_ptr<ChatTemplates> templates_;
  std::vector<llama_token_data> candidates_;  // grammar sampling's candidates, reused
  std::vector<llama_token_data> allowed_;
  llama_batch batch_;
  std::vector<Slot> slots_;
  SlotReuse reuse_;  // which free slot a prompt takes, and what its cells give it
  int active_ = 0;
  int n_batch_;
  int n_ctx_seq_;
};

}  // namespace mmserve
