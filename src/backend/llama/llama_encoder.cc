#include "backend/llama/llama_encoder.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "common/pages.h"

namespace mmserve {
namespace {

void NormalizeL2(const float* in, float* out, int n) {
  double sum = 0.0;  // accumulate in double, as llama.cpp's common_embd_normalize does
  for (int i = 0; i < n; ++i) sum += in[i] * in[i];
  sum = std::sqrt(sum);
  const float norm = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (int i = 0; i < n; ++i) out[i] = in[i] * norm;
}

bool LlamaAbortRequested(void* hooks) {
  return static_cast<const LlamaHooks*>(hooks)->aborted.load(std::memory_order_relaxed);
}

// Cuts after the attention, the FFN's up projection and the FFN, under the names llama.cpp's
// graph builders give those tensors ("kqv_out-3", "ffn_up-3", "ffn_out-3", and "l_out-3", the
// layer's output).
bool IsCut(std::string_view name) {
  return name.starts_with("kqv_out-") || name.starts_with("ffn_up-") ||
         name.starts_with("ffn_out-") || name.starts_with("l_out-");
}

bool LlamaAtGraphCut(ggml_tensor* t, bool ask, void* hooks) {
  const auto* h = static_cast<const LlamaHooks*>(hooks);
  YieldPoint* yield = h->instance ? h->instance->yield_point() : nullptr;
  // Each cut ends the compute threads' parallel region; none unless a more important model
  // is loaded on the device.
  if (ask) return yield && IsCut(t->name) && yield->MayYield();
  if (yield && !h->aborted.load(std::memory_order_relaxed) && yield->ShouldYield()) {
    ReleaseComputeThreads();
    yield->Yield();
  }
  return true;  // aborting is the abort callback's job
}

}  // namespace

void LlamaHooks::Attach(llama_context_params& params) {
  params.abort_callback = &LlamaAbortRequested;
  params.abort_callback_data = this;
  params.cb_eval = &LlamaAtGraphCut;
  params.cb_eval_user_data = this;
}

LlamaContext::LlamaContext(const llama_model* model, const llama_context_params& params)
    : model_(model), params_(params), hooks_(std::make_unique<LlamaHooks>()) {
  hooks_->Attach(params_);
}

Result<LlamaContext> LlamaContext::Create(
    const llama_model* model, const LlamaOptions& options,
    const std::function<void(llama_context_params&)>& configure) {
  llama_context_params params = llama_context_default_params();
  params.n_threads = ThreadCount(options);
  params.n_threads_batch = params.n_threads;
  params.no_perf = true;
  configure(params);
  LlamaContext out(model, params);
  MMS_RETURN_IF_ERROR(out.Acquire().status());
  return out;
}

Result<llama_context*> LlamaContext::Acquire() {
  if (!context_) {
    auto lock = LockLlamaAllocations();
    context_.reset(llama_init_from_model(const_cast<llama_model*>(model_), params_));
  }
  if (!context_) return Internal("llama.cpp could not create a context (see its log)");
  return context_.get();
}

bool LlamaContext::Release() {
  if (!context_) return false;
  context_.reset();
  // The graph's metadata sat in this thread's malloc arena, between blocks still in use: hand
  // the free pages back, not only the arena's top.
  malloc_trim(0);
  return true;
}

std::optional<std::chrono::milliseconds> IdleContextRelease(const LlamaOptions& options) {
  if (options.idle_context_ms < 0) return std::nullopt;
  return std::chrono::milliseconds(options.idle_context_ms);
}

std::unique_lock<std::mutex> LockLlamaAllocations() {
  static std::mutex mu;
  return std::unique_lock(mu);
}

std::string TokenPiece(const llama_vocab* vocab, llama_token token) {
  std::string piece(64, '\0');
  int n = llama_token_to_piece(vocab, token, piece.data(), static_cast<int32_t>(piece.size()), 0,
                               /*special=*/true);
  if (n < 0) {
    piece.resize(static_cast<size_t>(-n));
    n = llama_token_to_piece(vocab, token, piece.data(), -n, 0, /*special=*/true);
  }
  piece.resize(static_cast<size_t>(std::max(n, 0)));
  return piece;
}

void ReleaseComputeThreads() {
#ifdef _OPENMP
  omp_pause_resource_all(omp_pause_soft);
#endif
}

Result<std::unique_ptr<LlamaEncoder>> LlamaEncoder::Create(const llama_model* model,
                                                          EncoderTask task,
                                                          const LlamaOptions& options,
                                                          LlamaStats& stats) {
  const int n_batch = options.n_batch;
  auto created = LlamaContext::Create(model, options, [&](llama_context_params& params) {
    params.n_batch = static_cast<uint32_t>(n_batch);
    params.n_ubatch = static_cast<uint32_t>(n_batch);  // encoders take a whole batch in one ubatch
    params.n_seq_max = static_cast<uint32_t>(std::min<size_t>(
        static_cast<size_t>(options.n_parallel), llama_max_parallel_sequences()));
    // llama.cpp gives each sequence n_ctx / n_seq_max cells padded to 256 and rounds n_ctx to
    // match, with a warning the user can do nothing about: ask for that size to begin with.
    const uint32_t per_seq = (static_cast<uint32_t>(n_batch) + params.n_seq_max - 1) /
                             params.n_seq_max;
    params.n_ctx = (per_seq + 255) / 256 * 256 * params.n_seq_max;
    params.embeddings = true;
    if (task == EncoderTask::kRerank) {
      params.pooling_type = LLAMA_POOLING_TYPE_RANK;
    } else if (options.pooling == "mean") {
      params.pooling_type = LLAMA_POOLING_TYPE_MEAN;
    } else if (options.pooling == "cls") {
      params.pooling_type = LLAMA_POOLING_TYPE_CLS;
    } else if (options.pooling == "last") {
      params.pooling_type = LLAMA_POOLING_TYPE_LAST;
    }
  });
  if (!created.ok()) return created.status();
  if (task == EncoderTask::kEmbed &&
      llama_pooling_type(created->get()) == LLAMA_POOLING_TYPE_NONE) {
    return InvalidArgument("task embed needs a pooled embedding, but the model declares no "
                           "pooling type; set params.pooling to mean, cls or last");
  }
  return std::unique_ptr<LlamaEncoder>(
      new LlamaEncoder(model, task, options, stats, std::move(*created)));
}

LlamaEncoder::LlamaEncoder(const llama_model* model, EncoderTask task, LlamaOptions options,
                           LlamaStats& stats, LlamaContext context)
    : model_(model),
      vocab_(llama_model_get_vocab(model)),
      task_(task),
      options_(std::move(options)),
      stats_(stats),
      context_(std::move(context)) {
  context_.hooks().instance = this;
  n_batch_ = static_cast<int>(llama_n_batch(context_.get()));
  n_seq_max_ = static_cast<int>(llama_n_seq_max(context_.get()));
  n_embd_ = llama_model_n_embd_out(model_);
  row_width_ = task_ == EncoderTask::kEmbed ? n_embd_ : 1;
  const int n_ctx_train = llama_model_n_ctx_train(model_);
  max_tokens_ = std::min(n_batch_, n_ctx_train);
  if (options_.n_ctx > 0) max_tokens_ = std::min(max_tokens_, options_.n_ctx);
  batch_ = llama_batch_init(n_batch_, 0, 1);
  ReleaseUnusedLogits(n_seq_max_);  // the context reserved outputs for n_seq_max
  stats_.contexts.fetch_add(1);
}

void LlamaEncoder::Release() {
  if (context_.Release()) stats_.context_releases.fetch_add(1);
  logits_seen_ = nullptr;  // the next context's buffer may land where this one's was
}

void LlamaEncoder::ReleaseUnusedLogits(int n_tokens) {
  float* logits = llama_get_logits(context_.get());
  if (logits == nullptr || logits == logits_seen_) return;  // not reallocated since
  logits_seen_ = logits;
  const auto rows = static_cast<size_t>(std::max(n_tokens, n_seq_max_));
  ReleasePages(logits, rows * static_cast<size_t>(llama_vocab_n_tokens(vocab_)) * sizeof(float));
}

LlamaEncoder::~LlamaEncoder() {
  llama_batch_free(batch_);
  stats_.contexts.fetch_sub(1);
}

std::vector<llama_token> LlamaEncoder::Tokenize(std::string_view text, bool add_special) const {
  // parse_special matches llama-embedding for embeddings and llama-server's rerank prompt.
  const bool parse_special = task_ == EncoderTask::kEmbed;
  std::vector<llama_token> tokens(text.size() + 4);
  int n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                         static_cast<int32_t>(tokens.size()), add_special, parse_special);
  if (n < 0) {
    tokens.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                       static_cast<int32_t>(tokens.size()), add_special, parse_special);
  }
  tokens.resize(static_cast<size_t>(std::max(n, 0)));
  return tokens;
}

Status LlamaEncoder::Fit(std::vector<llama_token>& tokens, bool truncate, const std::string& what,
                         bool& was_truncated) const {
  was_truncated = false;
  if (static_cast<int>(tokens.size()) <= max_tokens_) return Status::Ok();
  if (!truncate) {
    return InvalidArgument(what + " has " + std::to_string(tokens.size()) +
                           " tokens; this model accepts at most " + std::to_string(max_tokens_) +
                           " per input (set the request parameter truncate: true to cut it)");
  }
  // Keep the closing special token (SEP/EOS) the tokenizer appended, as TEI does.
  const llama_token last = tokens.back();
  const bool closes = llama_vocab_get_add_eos(vocab_) || llama_vocab_get_add_sep(vocab_);
  tokens.resize(static_cast<size_t>(max_tokens_));
  if (closes) tokens.back() = last;
  was_truncated = true;
  return Status::Ok();
}

// The request parameter `dimensions`: the model's width, or one it was trained to be cut to.
Result<int> LlamaEncoder::Width(const InferRequest& request) const {
  MMS_ASSIGN_OR_RETURN(const int64_t asked,
                       IntParam(request.parameters, "dimensions", n_embd_, 1, 1 << 20));
  if (asked == n_embd_) return n_embd_;
  const auto& dims = options_.matryoshka_dims;
  if (std::find(dims.begin(), dims.end(), asked) != dims.end() && asked < n_embd_) {
    return static_cast<int>(asked);
  }
  std::string supported = std::to_string(n_embd_);
  for (int d : dims) {
    if (d < n_embd_) supported += ", " + std::to_string(d);
  }
  return InvalidArgument("dimensions: this model gives " + supported + " dimensions" +
                         (dims.empty() ? " (no params.matryoshka_dims: it was not trained to "
                                         "be cut)" : " (params.matryoshka_dims)") +
                         ", not " + std::to_string(asked));
}

Status LlamaEncoder::Prepare(size_t item, const InferRequest& request, std::vector<Sequence>& out,
                             std::vector<uint8_t>& truncated) const {
  const bool truncate = BoolParam(request.parameters, "truncate", options_.truncate);
  if (task_ == EncoderTask::kEmbed) {
    const Tensor* text = request.input("TEXT");
    const Tensor* ids = request.input("TOKENS");
    if (!text == !ids) return InvalidArgument("give either input 'TEXT' or input 'TOKENS'");
    const std::string name = text ? "TEXT" : "TOKENS";
    const auto elements = (text ? text : ids)->BytesElements();
    const int32_t n_vocab = llama_vocab_n_tokens(vocab_);
    const bool normalize = BoolParam(request.parameters, "normalize", options_.normalize);
    MMS_ASSIGN_OR_RETURN(const int width, Width(request));
    for (size_t i = 0; i < elements.size(); ++i) {
      const std::string what = name + "[" + std::to_string(i) + "]";
      Sequence s{item, i, {}};
      s.normalize = normalize;
      s.width = width;
      if (text) {
        s.tokens = Tokenize(elements[i], /*add_special=*/true);
      } else {
        // Each element holds one text's token ids, little-endian int32, used as given.
        const std::string_view raw = elements[i];
        if (raw.empty() || raw.size() % sizeof(int32_t) != 0) {
          return InvalidArgument(what + ": expected a non-empty list of int32 token ids");
        }
        s.tokens.resize(raw.size() / sizeof(int32_t));
        std::memcpy(s.tokens.data(), raw.data(), raw.size());
        for (llama_token t : s.tokens) {
          if (t < 0 || t >= n_vocab) {
            return InvalidArgument(what + ": token id " + std::to_string(t) +
                                   " is outside the vocabulary (0.." +
                                   std::to_string(n_vocab - 1) + ")");
          }
        }
      }
      bool cut = false;
      MMS_RETURN_IF_ERROR(Fit(s.tokens, truncate, what, cut));
      truncated.push_back(cut ? 1 : 0);
      out.push_back(std::move(s));
    }
    return Status::Ok();
  }
  // Rerank: one sequence per (query, document) pair, built as llama-server builds it:
  // [BOS] query [EOS] [SEP] document [EOS], each special token as the vocabulary asks.
  const Tensor* query = request.input("QUERY");
  const Tensor* docs = request.input("DOCUMENTS");
  if (!query || !docs) return InvalidArgument("rerank needs inputs 'QUERY' and 'DOCUMENTS'");
  const auto q = query->BytesElements();
  if (q.size() != 1) return InvalidArgument("QUERY: expected exactly one query");
  const auto query_tokens = Tokenize(q[0], /*add_special=*/false);
  llama_token eos = llama_vocab_eos(vocab_);
  if (eos == LLAMA_TOKEN_NULL) eos = llama_vocab_sep(vocab_);
  const auto documents = docs->BytesElements();
  const bool sigmoid = BoolParam(request.parameters, "sigmoid", options_.sigmoid);
  // A query that fills the budget by itself is the query's fault, not the first document's.
  if (!truncate && static_cast<int64_t>(query_tokens.size()) + 4 > max_tokens_) {
    return InvalidArgument("QUERY has " + std::to_string(query_tokens.size()) +
                           " tokens; this model accepts at most " + std::to_string(max_tokens_) +
                           " per query and document together (set the request parameter "
                           "truncate: true to cut them)");
  }
  for (size_t i = 0; i < documents.size(); ++i) {
    Sequence s{item, i, {}, sigmoid};
    if (llama_vocab_get_add_bos(vocab_)) s.tokens.push_back(llama_vocab_bos(vocab_));
    s.tokens.insert(s.tokens.end(), query_tokens.begin(), query_tokens.end());
    if (llama_vocab_get_add_eos(vocab_)) s.tokens.push_back(eos);
    if (llama_vocab_get_add_sep(vocab_)) s.tokens.push_back(llama_vocab_sep(vocab_));
    const auto doc_tokens = Tokenize(documents[i], /*add_special=*/false);
    s.tokens.insert(s.tokens.end(), doc_tokens.begin(), doc_tokens.end());
    if (llama_vocab_get_add_eos(vocab_)) s.tokens.push_back(eos);
    bool cut = false;
    MMS_RETURN_IF_ERROR(Fit(s.tokens, truncate,
                            "DOCUMENTS[" + std::to_string(i) + "] with the query", cut));
    truncated.push_back(cut ? 1 : 0);
    out.push_back(std::move(s));
  }
  return Status::Ok();
}

Status LlamaEncoder::Decode(const std::vector<Sequence>& seqs, size_t begin, size_t end,
                            std::vector<float>& rows) {
  if (context_.hooks().aborted.load()) return Cancelled("the execution was aborted");
  batch_.n_tokens = 0;
  for (size_t s = begin; s < end; ++s) {
    const auto& tokens = seqs[s].tokens;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int n = batch_.n_tokens++;
      batch_.token[n] = tokens[i];
      batch_.pos[n] = static_cast<llama_pos>(i);
      batch_.n_seq_id[n] = 1;
      batch_.seq_id[n][0] = static_cast<llama_seq_id>(s - begin);
      batch_.logits[n] = true;
    }
  }
  llama_memory_clear(llama_get_memory(context_.get()), true);
  if (int rc = llama_decode(context_.get(), batch_); rc != 0) {
    if (rc == 2) return Cancelled("llama_decode was aborted");
    return Internal("llama_decode failed with code " + std::to_string(rc));
  }
  ReleaseUnusedLogits(batch_.n_tokens);
  stats_.decodes.fetch_add(1);
  stats_.sequences.fetch_add(end - begin);
  stats_.tokens.fetch_add(static_cast<uint64_t>(batch_.n_tokens));
  for (size_t s = begin; s < end; ++s) {
    const float* embd = llama_get_embeddings_seq(context_.get(), static_cast<llama_seq_id>(s - begin));
    if (!embd) return Internal("llama.cpp returned no pooled output for a sequence");
    float* out = rows.data() + s * static_cast<size_t>(row_width_);
    if (task_ == EncoderTask::kRerank) {
      out[0] = seqs[s].sigmoid ? 1.0f / (1.0f + std::exp(-embd[0])) : embd[0];
    } else if (seqs[s].normalize) {  // a cut vector is normalized over what it keeps
      NormalizeL2(embd, out, seqs[s].width);
    } else {
      std::memcpy(out, embd, sizeof(float) * static_cast<size_t>(seqs[s].width));
    }
  }
  return Status::Ok();
}

bool LlamaEncoder::Abort() {
  context_.hooks().aborted.store(true);
  return true;
}

Status LlamaEncoder::Execute(Execution& execution) {
  BatchView batch = execution.items;
  execution.set_stage(Stage::kPreprocess);
  // Tokenize every text of every request; a request with a bad input fails alone.
  std::vector<Sequence> seqs;
  std::vector<uint8_t> truncated;
  std::vector<size_t> first(batch.size() + 1, 0);  // first sequence of each item
  std::vector<bool> failed(batch.size(), false);
  for (size_t b = 0; b < batch.size(); ++b) {
    const size_t seqs_before = seqs.size();
    if (Status s = Prepare(b, *batch[b].request, seqs, truncated); !s.ok()) {
      seqs.resize(seqs_before);
      truncated.resize(seqs_before);
      batch[b].result = s;
      failed[b] = true;
    }
    first[b + 1] = seqs.size();
  }
  // Pack sequences into decodes up to the token budget and the sequence limit.
  execution.set_stage(Stage::kExecute);
  if (!context_.get()) {  // released while idle
    MMS_RETURN_IF_ERROR(context_.Acquire().status());
    ReleaseUnusedLogits(n_seq_max_);
  }
  std::vector<float> rows(seqs.size() * static_cast<size_t>(row_width_));
  for (size_t begin = 0; begin < seqs.size();) {
    size_t end = begin;
    int tokens = 0;
    while (end < seqs.size() && static_cast<int>(end - begin) < n_seq_max_ &&
           tokens + static_cast<int>(seqs[end].tokens.size()) <= n_batch_) {
      tokens += static_cast<int>(seqs[end].tokens.size());
      ++end;
    }
    MMS_RETURN_IF_ERROR(Decode(seqs, begin, end, rows));
    begin = end;
  }
  // Split the rows back per request.
  execution.set_stage(Stage::kPostprocess);
  for (size_t b = 0; b < batch.size(); ++b) {
    if (failed[b]) continue;
    const size_t n = first[b + 1] - first[b];
    const auto* row = reinterpret_cast<const char*>(rows.data() + first[b] * row_width_);
    InferResponse response;
    int64_t prompt_tokens = 0;
    for (size_t q = first[b]; q < first[b + 1]; ++q) {
      prompt_tokens += static_cast<int64_t>(seqs[q].tokens.size());
    }
    response.parameters["prompt_tokens"] = prompt_tokens;
    if (task_ == EncoderTask::kEmbed) {
      // Each row's first `width` values (rows are n_embd apart; a request's are one width).
      const int width = n > 0 ? seqs[first[b]].width : n_embd_;
      std::string data(n * static_cast<size_t>(width) * sizeof(float), '\0');
      for (size_t q = 0; q < n; ++q) {
        std::memcpy(data.data() + q * static_cast<size_t>(width) * sizeof(float),
                    row + q * static_cast<size_t>(row_width_) * sizeof(float),
                    static_cast<size_t>(width) * sizeof(float));
      }
      response.outputs.emplace_back("EMBEDDING", DataType::kFp32,
                                    Shape{static_cast<int64_t>(n), width}, std::move(data));
    } else {
      response.outputs.emplace_back("SCORES", DataType::kFp32, Shape{static_cast<int64_t>(n)},
                                    std::string(row, n * sizeof(float)));
    }
    response.outputs.emplace_back(
        "TRUNCATED", DataType::kBool, Shape{static_cast<int64_t>(n)},
        std::string(reinterpret_cast<const char*>(truncated.data() + first[b]), n));
    batch[b].result = std::move(response);
  }
  return Status::Ok();
}

}  // namespace mmserve
