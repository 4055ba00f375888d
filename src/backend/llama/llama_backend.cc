#include "backend/llama/llama_backend.h"

#include <fcntl.h>
#include <llama.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "backend/file_probe.h"
#include "backend/generate_contract.h"
#include "backend/llama/gguf_summary.h"
#include "backend/llama/llama_chat.h"
#include "backend/llama/llama_encoder.h"
#include "backend/llama/llama_generator.h"
#include "backend/llama/prompt_cache.h"
#include "common/pages.h"
#include "common/strings.h"
#include "common/logging.h"

namespace mmserve {
namespace {

constexpr int64_t kMaxIdleContextMs = 24LL * 3600 * 1000;  // params.idle_context_ms: a day
// params.prompt_cache_mb when a generator's entry sets none: as much host memory as its KV cache
// (a second set of full slots: states of prompts as long as the context), which scales with
// the model (128 KiB per token for llama-base, 1 KiB for llama-tiny).
constexpr int64_t kPromptCacheAsKv = -1;

// A generator's KV cache: sequences, and cells per sequence (params, else llama.cpp's defaults).
int64_t KvSequences(const LlamaOptions& o) { return o.n_parallel > 0 ? o.n_parallel : 4; }
int64_t KvCells(const LlamaOptions& o) { return o.n_ctx > 0 ? o.n_ctx : 2048; }

// The F16 K and V of every sequence's cells, in double (the header's values are bounded, their
// products not necessarily within int64).
double KvBytes(const LlamaOptions& o, const GgufSummary& gguf) {
  const double n_embd_kv =
      gguf.n_head > 0 ? static_cast<double>(gguf.n_embd) * gguf.n_head_kv / gguf.n_head : 0;
  return 4.0 * KvSequences(o) * KvCells(o) * gguf.n_layer * n_embd_kv;
}

// The host prompt cache's room: params.prompt_cache_mb, or the KV cache's size by default.
double PromptCacheBytes(const LlamaOptions& o, const GgufSummary& gguf) {
  if (o.prompt_cache_mb == kPromptCacheAsKv) return KvBytes(o, gguf);
  return static_cast<double>(o.prompt_cache_mb) * (1 << 20);
}

// Per worker instance (one llama_context each), the buffers llama.cpp allocates at this release:
// graph metadata for its scheduler (a fixed ~24 MiB), outputs, and a compute buffer — for a
// generator dominated by the logits of a whole prompt chunk (n_batch x vocabulary), for an
// encoder growing with the token budget; a generator adds an F16 KV cache of n_seq x n_ctx cells
// per layer. In double: the header's values are bounded, but their products may still exceed
// int64.
double ContextBytes(const LlamaOptions& o, const GgufSummary& gguf, bool generate) {
  const int64_t n_batch = o.n_batch > 0 ? o.n_batch : (generate ? 512 : 2048);
  constexpr int64_t kGraphMetadataBytes = int64_t{24} << 20;
  double bytes = kGraphMetadataBytes;
  if (generate) {
    bytes += 4.0 * n_batch * gguf.n_vocab;          // chunk logits
    bytes += KvBytes(o, gguf);                      // K and V, F16
    bytes += 4.0 * KvSequences(o) * gguf.n_vocab;  // output logits
  } else {
    // Activations of a full token budget: per token ~9 floats per embedding dimension plus ~940
    // (fitted to llama.cpp's compute buffers for BERT at 64 and 768 dimensions).
    bytes += 4.0 * n_batch * (9.0 * gguf.n_embd + 940);
    bytes += 1024.0 * n_batch;  // outputs
  }
  return bytes;
}

// params.chat_template as the template's text: a built-in name or Jinja stays as written; a
// `.jinja` file is read from the model's folder (or below it), at most 1 MiB.
Result<std::string> ChatTemplateText(const ModelConfig& model, const LlamaOptions& options) {
  const std::string& value = options.chat_template;
  if (!value.ends_with(".jinja")) return value;
  namespace fs = std::filesystem;
  const fs::path folder = fs::weakly_canonical(model.path).parent_path();
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(folder / value, ec);
  const auto [end, ignored] = std::mismatch(folder.begin(), folder.end(), file.begin(), file.end());
  if (ec || end != folder.end()) {
    return InvalidArgument("params.chat_template: '" + value + "' is not inside the model's "
                           "folder " + folder.string());
  }
  const auto size = fs::is_regular_file(file, ec) ? fs::file_size(file, ec) : 0;
  if (ec || size == 0 || size > (size_t{1} << 20)) {
    return InvalidArgument("params.chat_template: '" + file.string() +
                           "' must be a file of 1 byte to 1 MiB of Jinja");
  }
  std::ifstream in(file, std::ios::binary);
  std::string text(size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size))) {
    return InvalidArgument("params.chat_template: '" + file.string() + "' cannot be read");
  }
  return text;
}

class LlamaSession final : public Session {
 public:
  // `context_bytes`: what one llama_context holds (ContextBytes).
  // `cache_bytes`: the host prompt cache's room (0: none).
  LlamaSession(LlamaModelPtr model, bool generate, EncoderTask task, LlamaOptions options,
               ModelSignature signature, int64_t context_bytes, int64_t cache_bytes)
      : model_(std::move(model)),
        generate_(generate),
        task_(task),
        options_(std::move(options)),
        signature_(std::move(signature)),
        context_bytes_(context_bytes) {
    if (generate_ && cache_bytes > 0) cache_ = std::make_unique<PromptCache>(cache_bytes);
  }

  const ModelSignature& signature() const override { return signature_; }
  // The weights as llama.cpp counts them, plus each instance's context buffers (KV cache,
  // compute, outputs) as ContextBytes sizes them: llama.h tells no context's buffer sizes, and
  // without them a generator's footprint missed its KV cache (a quarter of llama-base's at
  // 4 x 512). A context released while idle still counts: its instance makes it again. So
  // does the host prompt cache's limit, which it may fill at any moment.
  int64_t resident_bytes() const override {
    return static_cast<int64_t>(llama_model_size(model_.get())) +
           stats_.contexts.load() * context_bytes_ + (cache_ ? cache_->limit() : 0);
  }
  int64_t ShedCache(int64_t bytes) override { return cache_ ? cache_->Shed(bytes) : 0; }
  ExecutionStyle style() const override {
    return generate_ ? ExecutionStyle::kContinuous : ExecutionStyle::kBatch;
  }
  Result<std::unique_ptr<Instance>> CreateInstance(int) override {
    if (generate_) {
      MMS_ASSIGN_OR_RETURN(auto generator,
                           LlamaGenerator::Create(model_.get(), options_, stats_, cache_.get()));
      return std::unique_ptr<Instance>(std::move(generator));
    }
    MMS_ASSIGN_OR_RETURN(auto encoder, LlamaEncoder::Create(model_.get(), task_, options_, stats_));
    return std::unique_ptr<Instance>(std::move(encoder));
  }
  // An encoder: `rows` texts in one decode; a generator: one prompt, one token (a decode on
  // its context).
  std::unique_ptr<InferRequest> WarmupRequest(int rows) const override {
    auto request = std::make_unique<InferRequest>();
    std::string texts;
    for (int i = 0; i < (generate_ ? 1 : rows); ++i) Tensor::AppendBytesElement(texts, "warmup");
    request->inputs.emplace_back(generate_ ? generate::kPrompt : "TEXT", DataType::kBytes,
                                 Shape{generate_ ? 1 : rows}, std::move(texts));
    if (generate_) request->parameters["max_tokens"] = int64_t{1};
    return request;
  }
  std::map<std::string, int64_t> counters() const override {
    const Histogram first = stats_.time_to_first_token.Snapshot();
    std::map<std::string, int64_t> counters{{"decodes", static_cast<int64_t>(stats_.decodes.load())},
            {"sequences", static_cast<int64_t>(stats_.sequences.load())},
            {"tokens", static_cast<int64_t>(stats_.tokens.load())},
            {"generated_tokens", static_cast<int64_t>(stats_.generated_tokens.load())},
            {"reused_prompt_tokens", static_cast<int64_t>(stats_.reused_prompt_tokens.load())},
            {"context_releases", static_cast<int64_t>(stats_.context_releases.load())},
            {"first_tokens", first.count},
            {"first_token_ns", first.sum_ns}};
    if (cache_) {
      const PromptCache::Counts c = cache_->counts();
      counters.insert({{"prompt_cache_lookups", c.lookups},
                       {"prompt_cache_hits", c.hits},
                       {"prompt_cache_restored_tokens", c.restored_tokens},
                       {"prompt_cache_saved", c.saved},
                       {"prompt_cache_evicted", c.evicted},
                       {"prompt_cache_entries", c.entries},
                       {"prompt_cache_bytes", cache_->bytes()},
                       {"prompt_cache_limit_bytes", cache_->limit()}});
    }
    return counters;
  }
  Result<std::vector<Token>> Tokenize(std::string_view text, bool add_special,
                                      bool pieces) const override {
    if (text.size() > static_cast<size_t>(INT32_MAX / 2)) {
      return InvalidArgument("content: too long to tokenize");
    }
    const llama_vocab* vocab = llama_model_get_vocab(model_.get());
    const auto len = static_cast<int32_t>(text.size());
    std::vector<llama_token> ids(text.size() + 2);
    int32_t n = llama_tokenize(vocab, text.data(), len, ids.data(),
                               static_cast<int32_t>(ids.size()), add_special,
                               /*parse_special=*/true);
    if (n < 0) {
      ids.resize(static_cast<size_t>(-n));
      n = llama_tokenize(vocab, text.data(), len, ids.data(), -n, add_special, true);
    }
    if (n < 0) return Internal("llama.cpp could not tokenize the text");
    std::vector<Token> out(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
      out[i].id = ids[i];
      if (pieces) out[i].piece = TokenPiece(vocab, ids[i]);
    }
    return out;
  }
  Result<std::string> Detokenize(std::span<const int32_t> tokens) const override {
    const llama_vocab* vocab = llama_model_get_vocab(model_.get());
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    if (tokens.size() > static_cast<size_t>(INT32_MAX / 64)) {
      return InvalidArgument("tokens: too many");
    }
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= n_vocab) {
        return InvalidArgument("tokens[" + std::to_string(i) + "]: expected a token id in 0.." +
                               std::to_string(n_vocab - 1) + ", found " +
                               std::to_string(tokens[i]));
      }
    }
    // Each token's piece, special tokens as their text, joined as they are: llama-server's
    // /detokenize. llama_detokenize would also drop a leading space and respace BERT's pieces.
    std::string text;
    for (const int32_t token : tokens) text += TokenPiece(vocab, token);
    return text;
  }
  int64_t context_length() const override { return context_length_; }
  std::map<std::string, Histogram> histograms() const override {
    if (!generate_) return {};
    return {{"time_to_first_token", stats_.time_to_first_token.Snapshot()},
            {"time_per_output_token", stats_.time_per_output_token.Snapshot()}};
  }

 private:
  LlamaModelPtr model_;
  const bool generate_;
  const EncoderTask task_;
  const LlamaOptions options_;
  const ModelSignature signature_;
  const int64_t context_bytes_;
  std::unique_ptr<PromptCache> cache_;  // generate with params.prompt_cache_mb > 0; else null
  // Per sequence: params.n_ctx, else the model's training context.
  const int64_t context_length_ =
      options_.n_ctx > 0 ? options_.n_ctx : llama_model_n_ctx_train(model_.get());
  LlamaStats stats_;
};

}  // namespace

LlamaOptions ReadLlamaOptions(const ModelConfig& model, ConfigErrors& errors) {
  ParamReader r(model.params, errors);
  LlamaOptions o;
  o.n_ctx = static_cast<int>(r.Int("n_ctx", o.n_ctx, 0, 1 << 20));
  o.n_parallel = static_cast<int>(r.Int("n_parallel", o.n_parallel, 0, 256));
  o.n_batch = static_cast<int>(r.Int("n_batch", o.n_batch, 0, 1 << 20));
  o.n_threads = static_cast<int>(r.Int("n_threads", o.n_threads, 0, 1024));
  o.pooling = r.String("pooling", o.pooling, {"model", "mean", "cls", "last", "rank"});
  o.normalize = r.Bool("normalize", o.normalize);
  o.truncate = r.Bool("truncate", o.truncate);
  o.sigmoid = r.Bool("sigmoid", o.sigmoid);
  // Checked against the task and the width in Validate, once the file has said both.
  for (int64_t d : r.IntList("matryoshka_dims", 1, 1 << 20)) {
    o.matryoshka_dims.push_back(static_cast<int>(d));
  }
  o.chat_template = r.String("chat_template", o.chat_template);
  o.huge_pages = r.Bool("huge_pages", o.huge_pages);
  o.mmap = r.Bool("mmap", o.mmap);
  // A generator's context is mostly its KV cache, cleared whole when made: making it again
  // costs seconds (docs/BENCHMARKS.md P6), so a generator keeps it unless told otherwise.
  o.idle_context_ms = r.Int("idle_context_ms", model.task == "generate" ? -1 : o.idle_context_ms,
                            -1, kMaxIdleContextMs);
  if (o.huge_pages && o.mmap) {
    // huge_pages advises the buffers a copy fills; mapped weights are the page cache's.
    r.Error("huge_pages", "huge_pages only with mmap: false (it advises the buffers the weights "
            "are copied into; mapped weights have none)", "true with mmap: true",
            "drop one of the two");
  }
  // The host prompt cache is charged as part of the model's footprint, which a GPU build puts in
  // the GPU's budget: there it is off until the cache has a budget of its own.
  const bool host_domain = !llama_supports_gpu_offload();
  if (r.Has("prompt_cache_mb") && (model.task != "generate" || !host_domain)) {
    r.Error("prompt_cache_mb",
            model.task != "generate"
                ? "no prompt_cache_mb (only task generate keeps prompt states)"
                : "no prompt_cache_mb in a GPU build (the cache would be charged to the GPU's "
                  "budget, not the host's)",
            "it with task " + model.task);
    (void)r.Raw("prompt_cache_mb");
  } else {
    o.prompt_cache_mb = model.task == "generate" && host_domain ? kPromptCacheAsKv : 0;
    o.prompt_cache_mb = r.Int("prompt_cache_mb", o.prompt_cache_mb, 0, 1 << 20);
  }
  if (r.Has("max_tokens") && model.task != "generate") {
    r.Error("max_tokens", "no max_tokens (only task generate generates tokens)",
            "it with task " + model.task);
    (void)r.Raw("max_tokens");
  } else {
    o.max_tokens = static_cast<int>(r.Int("max_tokens", o.max_tokens, 1, 1 << 20));
  }
  r.Finish();
  return o;
}

int ThreadCount(const LlamaOptions& options) {
  return options.n_threads > 0 ? options.n_threads
                               : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {

Result<Fd> OpenProbed(const ModelConfig& model, const GgufSummary& gguf, bool file_template);

// What serve's load would find in a child: llama.cpp's loader and, for a generator, the chat
// template (it parses and renders). A probe that could not run (Unavailable, a binary that
// serves no probes) says nothing of the file; a run's outcome is kept, so the load reuses it.
void CheckProbe(const ModelConfig& model, const GgufSummary& gguf, bool file_template,
                ConfigErrors& errors) {
  auto probed = OpenProbed(model, gguf, file_template);
  if (probed.ok() || probed.status().code() == StatusCode::kUnavailable ||
      probed.status().code() == StatusCode::kDeadlineExceeded) {
    return;
  }
  errors.Add({.where = model.where, .field = model.Field("path"),
              .expected = "a model llama.cpp loads, with a chat template that renders",
              .found = std::string(probed.status().message())});
}

}  // namespace

void LlamaBackend::Validate(ModelConfig& model, ConfigErrors& errors) const {
  const LlamaOptions options = ReadLlamaOptions(model, errors);
  if (auto text = ChatTemplateText(model, options); !text.ok()) {
    errors.Add({.where = model.where, .field = model.Field("params.chat_template"),
                .expected = "a built-in template name, Jinja, or a .jinja file next to the model",
                .found = std::string(text.status().message())});
  }
  if (model.path.empty() || !std::filesystem::is_regular_file(model.path)) return;  // reported
  // The header, without loading: what serve would otherwise fail on at load time.
  auto gguf = ReadGguf(model.path.string());
  if (!gguf.ok()) {
    errors.Add({.where = model.where, .field = model.Field("path"), .expected = "a readable GGUF file",
                .found = std::string(gguf.status().message())});
    return;
  }
  const std::string suited = TaskFor(*gguf);
  if (!model.task_set) model.task = suited;
  if (model.task == "generate") {
    CheckProbe(model, *gguf, /*file_template=*/options.chat_template.empty(), errors);
  }
  for (int d : options.matryoshka_dims) {
    if (model.task != "embed" || d >= gguf->n_embd) {
      errors.Add({.where = model.where, .field = model.Field("params.matryoshka_dims"),
                  .expected = "widths below the model's " + std::to_string(gguf->n_embd) +
                              ", for task embed (the widths it was trained to be cut to)",
                  .found = std::to_string(d) + " with task " + model.task});
      break;
    }
  }
  if (!model.task_set) return;
  const std::string what = "'" + model.path.filename().string() + "' (architecture '" +
                           gguf->architecture + "'" +
                           (gguf->has_classifier ? ", a classification head" : "") + ")";
  if (model.task == "generate" && suited != "generate") {
    errors.Add({.where = model.where, .field = model.Field("task"),
                .expected = "a task " + what + " can do: it is an encoder, not a decoder",
                .found = "\"generate\"", .hint = "use task: " + suited});
  } else if (model.task == "rerank" && !gguf->has_classifier) {
    errors.Add({.where = model.where, .field = model.Field("task"),
                .expected = "a task " + what + " can do: rerank needs a classification head "
                            "(cls.output.weight)",
                .found = "\"rerank\"", .hint = "use task: " + suited});
  }
}


Result<MemoryEstimate> LlamaBackend::Estimate(const ModelConfig& model) const {
  ConfigErrors errors;
  const LlamaOptions o = ReadLlamaOptions(model, errors);
  MMS_RETURN_IF_ERROR(errors.ToStatus());
  MMS_ASSIGN_OR_RETURN(GgufSummary gguf, ReadGguf(model.path.string()));
  // Each worker's context (ContextBytes); the model adds its weights and vocabulary tables.
  const bool generate = model.task == "generate";
  constexpr int64_t kBytesPerVocabEntry = 160;
  const double per_instance = ContextBytes(o, gguf, generate);
  std::string source = "GGUF tensor table + vocabulary + " + std::to_string(model.thread_num) +
                       " x (graph + compute buffer";
  if (generate) {
    source += " + KV cache " + std::to_string(KvSequences(o)) + " x " +
              std::to_string(KvCells(o)) + " cells";
  }
  const double cache = PromptCacheBytes(o, gguf);
  const double bytes = static_cast<double>(gguf.weights_bytes) +
                       static_cast<double>(gguf.n_vocab) * kBytesPerVocabEntry +
                       per_instance * model.thread_num + cache;
  if (bytes > 0x1p62) {
    return InvalidArgument("'" + model.path.string() + "' with these params needs " +
                           std::to_string(bytes / (1 << 30)) + " GiB: implausible (check its "
                           "header and params.n_ctx, n_parallel, n_batch)");
  }
  source += ")";
  if (cache > 0) source += " + prompt cache " + FormatWholeMib(static_cast<int64_t>(cache));
  return MemoryEstimate{.bytes = static_cast<int64_t>(bytes), .source = source};
}

namespace {

// The model's file as one open descriptor, probed in a child first (llama.cpp's loader aborts on
// files its checks miss); the load then reads the same descriptor, so a file renamed over the
// path meanwhile is not what loads. `file_template`: a generator that renders with the file's
// own chat template (no params.chat_template), which must have rendered in the probe.
Result<Fd> OpenProbed(const ModelConfig& model, const GgufSummary& gguf, bool file_template) {
  Fd file(::open(model.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) return NotFound("'" + model.path.string() + "': " + std::strerror(errno));
  MMS_ASSIGN_OR_RETURN(const FileIdentity identity, IdentityOf(file.get()));
  ProbeSpec probe{.backend = "llama",
                  .what = "llama.cpp's GGUF loader (and chat template)",
                  .file = model.path.filename().string(),
                  .fd = file.get(),
                  .address_space_bytes = identity.size + (int64_t{16} << 30),
                  // Reading the metadata and rendering a few conversations take well under a
                  // second of CPU; a template that loops is stopped at this.
                  .cpu = std::chrono::seconds(30)};
  auto probed = ProbeOnce(probe, identity);
  if (!probed.ok()) {
    return probed.status().WithContext("llama.cpp could not load '" + model.path.string() +
                                       "' (architecture '" + gguf.architecture + "')");
  }
  const size_t template_error = probed->find(';');
  if (file_template && template_error != std::string::npos) {
    return InvalidArgument("model '" + model.name + "' ('" + model.path.filename().string() +
                           "'): " + probed->substr(template_error + 1) +
                           " (set params.chat_template to replace it)");
  }
  return file;
}

// What a session of the task takes and answers (`n_embd`: the embedding width).
ModelSignature Signature(bool generate, EncoderTask task, int64_t n_embd) {
  ModelSignature signature{.platform = "llama_gguf"};
  if (generate) {
    using namespace generate;  // NOLINT: the contract's names, in one list
    signature.inputs = {{kPrompt, DataType::kBytes, {1}, /*optional=*/true},
                        {kRoles, DataType::kBytes, {-1}, /*optional=*/true},
                        {kContents, DataType::kBytes, {-1}, /*optional=*/true},
                        {kStop, DataType::kBytes, {-1}, /*optional=*/true},
                        {kMessages, DataType::kBytes, {1}, /*optional=*/true},
                        {kTools, DataType::kBytes, {1}, /*optional=*/true},
                        {kTemplateKwargs, DataType::kBytes, {1}, /*optional=*/true},
                        {kJsonSchema, DataType::kBytes, {1}, /*optional=*/true}};
    // MESSAGE: a chat's answer as a message (JSON: content, reasoning_content, tool_calls).
    signature.outputs = {{kText, DataType::kBytes, {1}}, {kMessage, DataType::kBytes, {1}}};
  } else if (task == EncoderTask::kEmbed) {
    // TEXT (strings), or TOKENS: each element one text's token ids as little-endian int32.
    signature.inputs = {{"TEXT", DataType::kBytes, {-1}, /*optional=*/true},
                        {"TOKENS", DataType::kBytes, {-1}, /*optional=*/true}};
    signature.outputs = {{"EMBEDDING", DataType::kFp32, {-1, n_embd}},
                         {"TRUNCATED", DataType::kBool, {-1}}};
  } else {
    signature.inputs = {{"QUERY", DataType::kBytes, {1}}, {"DOCUMENTS", DataType::kBytes, {-1}}};
    signature.outputs = {{"SCORES", DataType::kFp32, {-1}}, {"TRUNCATED", DataType::kBool, {-1}}};
  }
  return signature;
}

}  // namespace

Result<std::unique_ptr<Session>> LlamaBackend::LoadSession(const ModelConfig& model,
                                                           LoadProgress& load_progress) {
  ConfigErrors errors;
  LlamaOptions options = ReadLlamaOptions(model, errors);
  MMS_RETURN_IF_ERROR(errors.ToStatus());
  MMS_ASSIGN_OR_RETURN(GgufSummary gguf, ReadGguf(model.path.string()));
  const bool generate = model.task == "generate";
  if (options.n_parallel == 0) options.n_parallel = generate ? 4 : 16;
  // Generation reserves logits for a whole prompt chunk (n_batch x vocabulary): keep it modest.
  if (options.n_batch == 0) options.n_batch = generate ? 512 : 2048;
  const EncoderTask task = model.task == "rerank" ? EncoderTask::kRerank : EncoderTask::kEmbed;
  if (task == EncoderTask::kRerank && !gguf.has_classifier) {
    return InvalidArgument("task rerank needs a model with a classification head "
                           "(cls.output.weight); '" + model.path.string() + "' has none");
  }
  MMS_ASSIGN_OR_RETURN(Fd file, OpenProbed(model, gguf, generate && options.chat_template.empty()));
  if (generate) {
    MMS_ASSIGN_OR_RETURN(options.chat_template, ChatTemplateText(model, options));
  }  // before any allocation lock
  llama_model_params params = llama_model_default_params();
  // Weights copied into memory the process owns (resident from the load on, as the budget
  // counts them; a file replaced in place cannot fault a running model), or with params.mmap
  // the page cache's: a reload after an eviction then reads and copies nothing.
  params.load_mode = options.mmap ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
  params.lazy_mode = LLAMA_LAZY_MODE_OFF;
  // With params.huge_pages, on huge pages as the page cache would have mapped them: llama.cpp
  // allocates the weight buffers before it reads the first tensor and reports progress before
  // each, so the first report is the moment to advise them. Until then no other llama.cpp
  // allocation runs, so no other model's buffers are advised. The same callback reports how
  // far the load has read (LoadProgress).
  struct Progress {
    LoadProgress& reported;
    std::unique_lock<std::mutex> lock;
    std::optional<HugePageAdvice> advice;  // made under the lock: the mappings before the load
  } progress{.reported = load_progress};
  if (options.huge_pages) {
    progress.lock = LockLlamaAllocations();
    progress.advice.emplace();
  }
  params.progress_callback = [](float fraction, void* data) {
    auto* p = static_cast<Progress*>(data);
    if (p->lock.owns_lock()) {
      p->advice->AdviseNew();
      p->lock.unlock();
    }
    p->reported.Update(fraction);
    return true;
  };
  params.progress_callback_user_data = &progress;
  const std::string opened = "/proc/self/fd/" + std::to_string(file.get());
  LlamaModelPtr loaded(llama_model_load_from_file(opened.c_str(), params));
  if (progress.lock.owns_lock()) progress.lock.unlock();  // a model without tensors
  if (!loaded) {
    return InvalidArgument("llama.cpp could not load '" + model.path.string() +
                           "' (architecture '" + gguf.architecture +
                           "'; unsupported or corrupt — see the llama.cpp log)");
  }
  if (generate && (!llama_model_has_decoder(loaded.get()) || gguf.has_classifier ||
                   gguf.architecture == "bert")) {
    return InvalidArgument("task generate needs a decoder language model; '" +
                           model.path.string() + "' (architecture '" + gguf.architecture +
                           "') is an encoder" +
                           (gguf.has_classifier ? " with a classification head" : ""));
  }
  ModelSignature signature = Signature(generate, task, llama_model_n_embd_out(loaded.get()));
  const auto context_bytes = static_cast<int64_t>(ContextBytes(options, gguf, generate));
  const auto cache_bytes = generate ? static_cast<int64_t>(PromptCacheBytes(options, gguf)) : 0;
  return std::unique_ptr<Session>(std::make_unique<LlamaSession>(
      std::move(loaded), generate, task, options, std::move(signature), context_bytes,
      cache_bytes));
}

// The child loads the model and renders a few conversations with its chat template (Jinja from
// the file: parsed and run by llama.cpp's common library, which has no bounds of its own, so it
// first runs here, under the probe's CPU and memory limits). A template that fails is the
// outcome's second part (after ';'): it fails a generator's load, not an embedder's.
Result<std::string> LlamaBackend::ProbeFile(int fd, int64_t /*arg*/) const {
  llama_model_params params = llama_model_default_params();
  params.load_mode = LLAMA_LOAD_MODE_MMAP;  // the tensors' bytes are not read, only checked
  params.n_gpu_layers = 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  LlamaModelPtr loaded(llama_model_load_from_file(path.c_str(), params));
  if (!loaded) return InvalidArgument("unsupported or corrupt");
  std::string outcome = std::to_string(llama_model_size(loaded.get()));
  if (Status chat = ProbeChatTemplates(loaded.get()); !chat.ok()) {
    outcome += ";" + std::string(chat.message());  // one line: the answer escapes newlines
  }
  return outcome;
}

}  // namespace mmserve
