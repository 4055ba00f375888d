#include "backend/llama/llama_generator.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "backend/generate_contract.h"
#include "backend/llama/llama_request.h"
#include "common/json.h"
#include "common/logging.h"

namespace mmserve {
namespace {

// The length of the longest prefix of `s` that does not end inside a UTF-8 character: a token
// piece may carry only the first bytes of one, and a partial must not split it.
size_t CompleteUtf8Prefix(std::string_view s) {
  size_t i = s.size();
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > back) i = s.size() - back;  // a lead byte whose character is not complete yet
    break;
  }
  return i;
}

}  // namespace

Result<std::unique_ptr<LlamaGenerator>> LlamaGenerator::Create(const llama_model* model,
                                                              const LlamaOptions& options,
                                                              LlamaStats& stats,
                                                              PromptCache* cache) {
  // The chat template first: one that does not parse fails the load, before any context.
  MMS_ASSIGN_OR_RETURN(auto templates, ChatTemplates::Create(model, options.chat_template));
  const int n_seq = options.n_parallel;
  const int n_ctx_seq = options.n_ctx > 0 ? options.n_ctx : 2048;
  auto created = LlamaContext::Create(model, options, [&](llama_context_params& params) {
    params.n_ctx = static_cast<uint32_t>(n_ctx_seq * n_seq);
    params.n_seq_max = static_cast<uint32_t>(n_seq);
    params.kv_unified = false;  // one KV stream per sequence: results do not depend on neighbours
    params.n_batch = static_cast<uint32_t>(std::min(options.n_batch, n_ctx_seq * n_seq));
    params.n_ubatch = params.n_batch;
  });
  if (!created.ok()) return created.status();
  return std::unique_ptr<LlamaGenerator>(
      new LlamaGenerator(model, options, stats, cache, std::move(*created), std::move(templates)));
}

LlamaGenerator::LlamaGenerator(const llama_model* model, LlamaOptions options, LlamaStats& stats,
                               PromptCache* cache, LlamaContext context,
                               std::unique_ptr<ChatTemplates> templates)
    : model_(model),
      vocab_(llama_model_get_vocab(model)),
      options_(std::move(options)),
      stats_(stats),
      cache_(cache),
      context_(std::move(context)),
      templates_(std::move(templates)),
      slots_(static_cast<size_t>(llama_n_seq_max(context_.get()))),
      reuse_(model, static_cast<int>(slots_.size()), context_, stats_, cache_) {
  context_.hooks().instance = this;
  n_batch_ = static_cast<int>(llama_n_batch(context_.get()));
  n_ctx_seq_ = static_cast<int>(llama_n_ctx_seq(context_.get()));
  batch_ = llama_batch_init(n_batch_, 0, 1);
  stats_.contexts.fetch_add(1);
}

LlamaGenerator::~LlamaGenerator() {
  CancelAll(Unavailable("the model was unloaded"));
  llama_batch_free(batch_);
  stats_.contexts.fetch_sub(1);
}

bool LlamaGenerator::Abort() {
  context_.hooks().aborted.store(true);
  return true;
}

int LlamaGenerator::free_slots() const { return static_cast<int>(slots_.size()) - active_; }


// The prompt: PROMPT as it is, or chat messages rendered; a chat gets its reader, and either
// gets the grammar its answer follows.
Status LlamaGenerator::PlanPrompt(Slot& slot, std::string& prompt) {
  const InferRequest& r = *slot.request;
  const Tensor* prompt_input = r.input(generate::kPrompt);
  MMS_ASSIGN_OR_RETURN(auto schema, OneText(r, generate::kJsonSchema));
  ChatPlan plan;
  if (prompt_input) {
    if (r.input(generate::kRoles) || r.input(generate::kContents) || r.input(generate::kMessages)) {
      return InvalidArgument("give either PROMPT, or chat messages as ROLES and CONTENTS");
    }
    const auto texts = prompt_input->BytesElements();
    if (texts.size() != 1) return InvalidArgument("PROMPT: expected exactly one prompt");
    prompt = std::string(texts[0]);
    if (schema) {
      MMS_ASSIGN_OR_RETURN(plan.grammar,
                           SchemaToGrammar(*schema, "response_format.json_schema.schema"));
    }
  } else {
    if (!r.input(generate::kMessages) && !r.input(generate::kRoles) && !r.input(generate::kContents)) {
      return InvalidArgument("missing input 'PROMPT' (or chat messages as ROLES and CONTENTS)");
    }
    MMS_ASSIGN_OR_RETURN(ChatRequest chat, ChatRequestOf(r));
    chat.json_schema = schema.value_or("");
    // A prompt of more bytes than 64 per context cell cannot fit the context.
    MMS_ASSIGN_OR_RETURN(plan, templates_->Apply(chat, static_cast<size_t>(n_ctx_seq_) * 64));
    if (!plan.tools_error.empty() && !BoolParam(r.parameters, generate::kRenderOnly, false)) {
      return InvalidArgument(plan.tools_error);
    }
    prompt = std::move(plan.prompt);
    spdlog::debug("chat: format {}, grammar {} bytes{}, {} trigger patterns, {} trigger tokens, "
                  "{} stops", plan.format, plan.grammar.size(), plan.grammar_lazy ? " (lazy)" : "",
                  plan.trigger_patterns.size(), plan.trigger_tokens.size(), plan.stops.size());
    spdlog::trace("chat: grammar:\n{}", plan.grammar);
    for (auto& stop : plan.stops) slot.stops.push_back(std::move(stop));
    slot.reader = std::make_unique<ChatReader>(plan);
  }
  if (plan.grammar.empty()) return Status::Ok();
  MMS_ASSIGN_OR_RETURN(llama_sampler* grammar, MakeGrammar(vocab_, plan));
  slot.grammar.reset(grammar);
  if (plan.grammar_lazy || plan.generation_prompt.empty()) return Status::Ok();
  return Prefill(vocab_, grammar, plan.generation_prompt);
}

Status LlamaGenerator::Prepare(Slot& slot) {
  const InferRequest& r = *slot.request;
  std::string rendered;
  MMS_RETURN_IF_ERROR(PlanPrompt(slot, rendered));
  if (BoolParam(r.parameters, generate::kRenderOnly, false)) {
    slot.text = std::move(rendered);
    return Status::Ok();
  }
  const std::string_view text = rendered;
  std::vector<llama_token> tokens(text.size() + 8);
  int n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                         static_cast<int32_t>(tokens.size()), /*add_special=*/true,
                         /*parse_special=*/true);
  if (n < 0) {
    tokens.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                       static_cast<int32_t>(tokens.size()), true, true);
  }
  tokens.resize(static_cast<size_t>(std::max(n, 0)));
  if (tokens.empty()) return InvalidArgument("PROMPT: the prompt has no tokens");
  MMS_ASSIGN_OR_RETURN(const int64_t max_tokens,
                       IntParam(r.parameters, "max_tokens", options_.max_tokens, 1, INT32_MAX));
  slot.max_tokens = static_cast<int>(max_tokens);
  if (static_cast<int>(tokens.size()) + 1 > n_ctx_seq_) {
    return InvalidArgument("PROMPT has " + std::to_string(tokens.size()) +
                           " tokens; this model's context holds " + std::to_string(n_ctx_seq_) +
                           " per sequence (params.n_ctx)");
  }
  MMS_ASSIGN_OR_RETURN(const double temperature_param,
                       RealParam(r.parameters, "temperature", 0.0, 0.0, 1e6));
  MMS_ASSIGN_OR_RETURN(const double repeat_penalty_param,
                       RealParam(r.parameters, "repeat_penalty", 1.0, 0.0, 1e6));
  if (repeat_penalty_param <= 0) return InvalidArgument("parameter repeat_penalty: expected > 0");
  MMS_ASSIGN_OR_RETURN(const int64_t top_k,
                       IntParam(r.parameters, "top_k", 40, INT32_MIN, INT32_MAX));
  MMS_ASSIGN_OR_RETURN(const double top_p, RealParam(r.parameters, "top_p", 1.0, 0.0, 1.0));
  MMS_ASSIGN_OR_RETURN(const double min_p, RealParam(r.parameters, "min_p", 0.0, 0.0, 1.0));
  MMS_ASSIGN_OR_RETURN(const int64_t seed,
                       IntParam(r.parameters, "seed", LLAMA_DEFAULT_SEED, INT64_MIN, INT64_MAX));
  const auto temperature = static_cast<float>(temperature_param);
  auto chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  const auto repeat_penalty = static_cast<float>(repeat_penalty_param);
  if (repeat_penalty != 1.0f) {
    llama_sampler_chain_add(chain, llama_sampler_init_penalties(llama_vocab_n_tokens(vocab_), 64,
                                                                repeat_penalty, 0.0f, 0.0f));
  }
  if (temperature == 0.0f) {
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
  } else {
    if (top_k > 0) {
      llama_sampler_chain_add(chain, llama_sampler_init_top_k(static_cast<int32_t>(top_k)));
    }
    llama_sampler_chain_add(chain, llama_sampler_init_top_p(static_cast<float>(top_p), 1));
    llama_sampler_chain_add(chain, llama_sampler_init_min_p(static_cast<float>(min_p), 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(temperature));
    // Any integer seeds: its low 32 bits, as OpenAI's int64 seeds map onto llama.cpp's uint32.
    llama_sampler_chain_add(chain, llama_sampler_init_dist(static_cast<uint32_t>(seed)));
  }
  slot.sampler.reset(chain);
  // The chain keeps the top k by raw logit (no penalty first): the grammar's shortcut applies.
  if (repeat_penalty == 1.0f) slot.top_k_only = temperature == 0.0f ? 1 : top_k > 0 ? static_cast<int>(top_k) : 0;
  if (std::string stop = StringParam(r.parameters, "stop"); !stop.empty()) {
    slot.stops.push_back(std::move(stop));
  }
  if (const Tensor* stops = r.input(generate::kStop)) {
    for (std::string_view stop : stops->BytesElements()) {
      if (!stop.empty()) slot.stops.emplace_back(stop);
    }
  }
  slot.prompt = std::move(tokens);
  return Status::Ok();
}

void LlamaGenerator::Admit(std::unique_ptr<InferRequest> request) {
  if (active_ >= static_cast<int>(slots_.size())) {
    request->done(ResourceExhausted("no free generation slot"));
    return;
  }
  Slot slot;
  slot.request = std::move(request);
  if (Status s = Prepare(slot); !s.ok()) return slot.request->done(s);
  if (BoolParam(slot.request->parameters, generate::kRenderOnly, false)) {  // /apply-template
    InferResponse response;
    std::string data;
    Tensor::AppendBytesElement(data, slot.text);
    response.outputs.emplace_back(generate::kText, DataType::kBytes, Shape{1}, std::move(data));
    return slot.request->done(std::move(response));
  }
  const SlotReuse::Choice choice = reuse_.Choose(
      slot.prompt, StringParam(slot.request->parameters, generate::kCacheSalt),
      BoolParam(slot.request->parameters, generate::kCachePrompt, true),
      [this](int seq) { return slots_[static_cast<size_t>(seq)].request == nullptr; });
  slot.prompt_done = choice.reused;
  slot.reused = choice.reused;
  slots_[static_cast<size_t>(choice.seq)] = std::move(slot);
  ++active_;
}

void LlamaGenerator::Finish(int seq, Result<InferResponse> result, bool keep) {
  Slot& slot = slots_[static_cast<size_t>(seq)];
  if (keep && context_.get()) {
    // What the cells hold: the prompt and the generated tokens decoded after it.
    std::vector<llama_token> tokens = std::move(slot.prompt);
    tokens.insert(tokens.end(), slot.generated.begin(),
                  slot.generated.begin() + static_cast<ptrdiff_t>(slot.decoded_generated));
    reuse_.Keep(seq, std::move(tokens));
  } else {
    reuse_.Forget(seq);
  }
  auto request = std::move(slot.request);
  slot = Slot{};
  --active_;
  request->done(std::move(result));
}

void LlamaGenerator::FinishOk(int seq, const std::string& reason) {
  Slot& slot = slots_[static_cast<size_t>(seq)];
  InferResponse response;
  std::string data;
  Tensor::AppendBytesElement(data, slot.text);
  response.outputs.emplace_back(generate::kText, DataType::kBytes, Shape{1}, std::move(data));
  response.parameters[generate::kPromptTokens] = static_cast<int64_t>(slot.prompt.size());
  response.parameters[generate::kCompletionTokens] = static_cast<int64_t>(slot.generated.size());
  response.parameters[generate::kCachedTokens] = static_cast<int64_t>(slot.reused);
  response.parameters[generate::kFinishReason] = reason;
  if (slot.reader) {
    // The whole answer read as a message; streamed, its last deltas go out first.
    auto deltas = slot.reader->Update(slot.text, /*final=*/true);
    if (!deltas.ok()) return Finish(seq, deltas.status());
    if (slot.request->on_partial && !deltas->empty() && !SendDeltas(seq, *deltas, {})) return;
    std::string message;
    Tensor::AppendBytesElement(message, slot.reader->MessageJson());
    response.outputs.emplace_back(generate::kMessage, DataType::kBytes, Shape{1}, std::move(message));
    if (reason == "stop" && slot.reader->has_tool_calls()) {
      response.parameters[generate::kFinishReason] = std::string("tool_calls");
    }
  }
  const bool keep = reuse_.enabled() && BoolParam(slot.request->parameters, generate::kCachePrompt, true);
  Finish(seq, std::move(response), keep);
}

bool LlamaGenerator::SendDeltas(int seq, const std::vector<ChatDelta>& deltas,
                                std::string_view text) {
  Slot& slot = slots_[static_cast<size_t>(seq)];
  InferResponse partial;
  std::string data;
  Tensor::AppendBytesElement(data, text);
  partial.outputs.emplace_back(generate::kText, DataType::kBytes, Shape{1}, std::move(data));
  if (slot.reader) {
    std::string json;
    for (const auto& delta : deltas) Tensor::AppendBytesElement(json, ChatDeltaJson(delta));
    partial.outputs.emplace_back(generate::kDelta, DataType::kBytes,
                                 Shape{static_cast<int64_t>(deltas.size())}, std::move(json));
  }
  if (!slot.request->on_partial(partial)) {
    Finish(seq, Cancelled("the client went away"));
    return false;
  }
  return true;
}

// The chain's choice, checked against the grammar; if the grammar refuses it, the grammar
// filters the candidates and the chain chooses again (llama.cpp's common sampler does the same:
// most tokens pass, and the grammar then costs one check instead of a whole-vocabulary pass).
Result<llama_token> LlamaGenerator::NextToken(Slot& slot, int index) {
  if (!slot.grammar) return llama_sampler_sample(slot.sampler.get(), context_.get(), index);
  const float* logits = llama_get_logits_ith(context_.get(), index);
  if (!logits) return Internal("no logits for the sampled row");
  try {
    llama_token_data_array all = FillCandidates(logits);
    llama_sampler_apply(slot.sampler.get(), &all);
    llama_token token = all.data[all.selected].id;
    if (!Allowed(slot, token)) {
      std::optional<llama_token> best = FromBestAllowed(slot, logits);
      if (!best) {
        all = FillCandidates(logits);
        llama_sampler_apply(slot.grammar.get(), &all);
        llama_sampler_apply(slot.sampler.get(), &all);
        if (all.selected < 0 || all.data[all.selected].logit == -INFINITY) {
          return Internal("the answer's grammar allows no token here");
        }
        best = all.data[all.selected].id;
      }
      token = *best;
    }
    llama_sampler_accept(slot.grammar.get(), token);
    llama_sampler_accept(slot.sampler.get(), token);
    return token;
  } catch (const std::exception& e) {
    return Internal(std::string("the answer's grammar failed: ") + e.what());
  }
}

// Every token with its logit, in id order (the chains reorder and rescale what they pass).
llama_token_data_array LlamaGenerator::FillCandidates(const float* logits) {
  candidates_.resize(static_cast<size_t>(llama_vocab_n_tokens(vocab_)));
  for (size_t t = 0; t < candidates_.size(); ++t) {
    candidates_[t] = {static_cast<llama_token>(t), logits[t], 0.0f};
  }
  return llama_token_data_array{candidates_.data(), candidates_.size(), -1, false};
}

bool LlamaGenerator::Allowed(Slot& slot, llama_token token) {
  llama_token_data one{token, 1.0f, 0.0f};
  llama_token_data_array single{&one, 1, -1, false};
  llama_sampler_apply(slot.grammar.get(), &single);
  return one.logit != -INFINITY;
}

// The chain's choice among the tokens the grammar allows, without a whole-vocabulary pass of the
// grammar: when the chain keeps only the top k candidates by logit (greedy: k = 1; no penalty
// changes logits first), the top k allowed ones are found by checking candidates one by one in
// the order of their logits (ties by id, as greedy breaks them), and the chain chooses among
// them: the same token as a full pass. Nothing when the chain is not of that kind, or fewer than
// k of the best kMaxChecked candidates are allowed (the full pass then decides).
std::optional<llama_token> LlamaGenerator::FromBestAllowed(Slot& slot, const float* logits) {
  constexpr size_t kMaxChecked = 1024;
  if (slot.top_k_only <= 0) return std::nullopt;
  const size_t need = static_cast<size_t>(slot.top_k_only);
  FillCandidates(logits);  // the chain's pass left them reordered (and rescaled)
  auto better = [](const llama_token_data& a, const llama_token_data& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  // Usually one of the next few is allowed: the best 4 * k first, then up to kMaxChecked.
  size_t sorted = 0;
  allowed_.clear();
  for (size_t m : {std::max<size_t>(16, 4 * need), std::max(kMaxChecked, need)}) {
    m = std::min(m, candidates_.size());
    if (m <= sorted) break;
    std::partial_sort(candidates_.begin() + static_cast<ptrdiff_t>(sorted),
                      candidates_.begin() + static_cast<ptrdiff_t>(m), candidates_.end(), better);
    for (size_t i = sorted; i < m && allowed_.size() < need; ++i) {
      if (Allowed(slot, candidates_[i].id)) allowed_.push_back(candidates_[i]);
    }
    sorted = m;
    if (allowed_.size() == need) break;
  }
  if (allowed_.size() < need) return std::nullopt;
  llama_token_data_array best{allowed_.data(), allowed_.size(), -1, false};
  llama_sampler_apply(slot.sampler.get(), &best);
  if (best.selected < 0) return std::nullopt;
  return best.data[best.selected].id;
}

bool LlamaGenerator::Sample(int seq) {
  Slot& slot = slots_[static_cast<size_t>(seq)];
  // A client that left stops its generation at the next token, streamed or not.
  if (slot.request->cancelled && slot.request->cancelled()) {
    Finish(seq, Cancelled("the client went away"));
    return false;
  }
  const Result<llama_token> next = NextToken(slot, slot.logits_index);
  slot.logits_index = -1;
  if (!next.ok()) {
    Finish(seq, next.status());
    return false;
  }
  const llama_token token = *next;
  if (llama_vocab_is_eog(vocab_, token)) {
    FinishOk(seq, "stop");
    return false;
  }
  slot.generated.push_back(token);
  stats_.generated_tokens.fetch_add(1, std::memory_order_relaxed);
  const auto now = Clock::now();
  if (slot.generated.size() == 1) {
    stats_.time_to_first_token.Record(Nanos(now - slot.request->arrival));
  } else {
    stats_.time_per_output_token.Record(Nanos(now - slot.last_token));
  }
  slot.last_token = now;
  slot.text += TokenPiece(vocab_, token);
  // The earliest stop string in the text ends it; only the new piece (plus the overlap a stop
  // string could span) needs searching.
  size_t stop_at = std::string::npos;
  size_t held = 0;  // the longest tail of the text that begins some stop string
  for (const auto& stop : slot.stops) {
    const size_t from = slot.streamed;
    if (auto at = slot.text.find(stop, from); at != std::string::npos) {
      stop_at = std::min(stop_at, at);
    }
    for (size_t n = std::min(stop.size() - 1, slot.text.size()); n > held; --n) {
      if (slot.text.compare(slot.text.size() - n, n, stop, 0, n) == 0) {
        held = n;
        break;
      }
    }
  }
  if (stop_at != std::string::npos) {
    slot.text.resize(stop_at);
    FinishOk(seq, "stop");
    return false;
  }
  const size_t complete = CompleteUtf8Prefix(std::string_view(slot.text).substr(0, slot.text.size() - held));
  if (slot.request->on_partial && complete > slot.streamed) {
    std::vector<ChatDelta> deltas;
    if (slot.reader) {
      auto read = slot.reader->Update(slot.text.substr(0, complete), /*final=*/false);
      if (read.ok()) deltas = std::move(*read);  // a partial that does not read yet: later
    }
    const std::string_view piece =
        std::string_view(slot.text).substr(slot.streamed, complete - slot.streamed);
    slot.streamed = complete;
    if (!SendDeltas(seq, deltas, piece)) return false;
  }
  const bool context_full =
      static_cast<int>(slot.prompt.size() + slot.generated.size()) >= n_ctx_seq_;
  if (static_cast<int>(slot.generated.size()) >= slot.max_tokens || context_full) {
    FinishOk(seq, "length");
    return false;
  }
  return true;
}

void LlamaGenerator::Step() {
  if (Status made = context_.Acquire().status(); !made.ok()) {  // released while idle
    return CancelAll(made);
  }
  batch_.n_tokens = 0;
  auto add = [&](llama_token token, size_t pos, int seq, bool logits) {
    const int n = batch_.n_tokens++;
    batch_.token[n] = token;
    batch_.pos[n] = static_cast<llama_pos>(pos);
    batch_.n_seq_id[n] = 1;
    batch_.seq_id[n][0] = seq;
    batch_.logits[n] = logits;
    return n;
  };
  const auto now = Clock::now();
  // First the next token of every generating sequence: running streams never wait on prompts.
  for (int seq = 0; seq < static_cast<int>(slots_.size()); ++seq) {
    Slot& s = slots_[static_cast<size_t>(seq)];
    if (!s.request) continue;
    if (s.request->deadline <= now) {
      Finish(seq, DeadlineExceeded("generation passed its deadline after " +
                                   std::to_string(s.generated.size()) + " tokens"));
      continue;
    }
    s.in_batch = false;
    if (s.prompt_done == s.prompt.size() && !s.generated.empty()) {
      s.logits_index = add(s.generated.back(), s.prompt.size() + s.generated.size() - 1, seq, true);
      s.in_batch = true;
    }
  }
  // Then prompt chunks, as far as the token budget goes.
  for (int seq = 0; seq < static_cast<int>(slots_.size()) && batch_.n_tokens < n_batch_; ++seq) {
    Slot& s = slots_[static_cast<size_t>(seq)];
    if (!s.request || s.prompt_done == s.prompt.size()) continue;
    const size_t chunk = std::min(s.prompt.size() - s.prompt_done,
                                  static_cast<size_t>(n_batch_ - batch_.n_tokens));
    for (size_t i = 0; i < chunk; ++i) {
      const size_t pos = s.prompt_done + i;
      const int n = add(s.prompt[pos], pos, seq, pos + 1 == s.prompt.size());
      if (pos + 1 == s.prompt.size()) s.logits_index = n;
    }
    s.prompt_done += chunk;
  }
  if (batch_.n_tokens == 0) return;
  if (int rc = llama_decode(context_.get(), batch_); rc != 0) {
    const Status error = Internal("llama_decode failed with code " + std::to_string(rc));
    for (int seq = 0; seq < static_cast<int>(slots_.size()); ++seq) {
      if (slots_[static_cast<size_t>(seq)].request) Finish(seq, error);
    }
    return;
  }
  for (Slot& s : slots_) {
    if (s.request && s.in_batch) ++s.decoded_generated;
  }
  int sampled = 0;
  for (int seq = 0; seq < static_cast<int>(slots_.size()); ++seq) {
    if (slots_[static_cast<size_t>(seq)].request && slots_[static_cast<size_t>(seq)].logits_index >= 0) {
      ++sampled;
      Sample(seq);
    }
  }
  stats_.decodes.fetch_add(1);
  stats_.sequences.fetch_add(static_cast<uint64_t>(sampled));
  stats_.tokens.fetch_add(static_cast<uint64_t>(batch_.n_tokens));
}

void LlamaGenerator::CancelAll(const Status& status) {
  for (int seq = 0; seq < static_cast<int>(slots_.size()); ++seq) {
    if (slots_[static_cast<size_t>(seq)].request) Finish(seq, status);
  }
}

}  // namespace mmserve
