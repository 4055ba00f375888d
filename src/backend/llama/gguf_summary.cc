#include "backend/llama/gguf_summary.h"

#include <gguf.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "common/strings.h"

namespace mmserve {
namespace {

struct GgufDeleter {
  void operator()(gguf_context* g) const { gguf_free(g); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;

// Far above any released model, far below where products of them could overflow int64.
constexpr int64_t kMaxLayers = 1 << 14;
constexpr int64_t kMaxWidth = 1 << 20;  // embedding width, heads
constexpr int64_t kMaxVocab = 1 << 24;

Status Corrupt(const std::string& path, const std::string& what) {
  return InvalidArgument("'" + path + "' is a corrupt GGUF file: " + what);
}

// A u32 hyperparameter within [0, max]: `fallback` when absent or of another type.
Result<int64_t> U32(gguf_context* g, const std::string& path, const std::string& key,
                    int64_t fallback, int64_t max) {
  const int64_t k = gguf_find_key(g, key.c_str());
  if (k < 0 || gguf_get_kv_type(g, k) != GGUF_TYPE_UINT32) return fallback;
  const int64_t v = gguf_get_val_u32(g, k);
  if (v > max) {
    return Corrupt(path, Abbreviate(ToValidUtf8(key), 80) + " is " + std::to_string(v) +
                             " (at most " + std::to_string(max) + " is plausible)");
  }
  return v;
}

// llama.cpp builds token → id and id → token maps and asserts that they have the same size.
Status CheckVocabulary(gguf_context* g, const std::string& path, int64_t& n_vocab) {
  const int64_t k = gguf_find_key(g, "tokenizer.ggml.tokens");
  if (k < 0) return Status::Ok();  // llama.cpp reports a missing vocabulary itself
  if (gguf_get_kv_type(g, k) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, k) != GGUF_TYPE_STRING) {
    return Corrupt(path, "tokenizer.ggml.tokens is not a list of strings");
  }
  const size_t n = gguf_get_arr_n(g, k);
  if (n == 0 || static_cast<int64_t>(n) > kMaxVocab) {
    return Corrupt(path, "tokenizer.ggml.tokens has " + std::to_string(n) + " tokens");
  }
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // As llama.cpp reads them: C strings.
    const std::string_view token(gguf_get_arr_str(g, k, i));
    auto [it, inserted] = seen.emplace(token, i);
    if (!inserted) {
      return Corrupt(path, "tokenizer.ggml.tokens has the token \"" +
                               Abbreviate(ToValidUtf8(token)) + "\" twice (entries " +
                               std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
  }
  n_vocab = static_cast<int64_t>(n);
  return Status::Ok();
}

}  // namespace

Result<GgufSummary> ReadGguf(const std::string& path) {
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return InvalidArgument("'" + path + "' is not a GGUF file (bad magic)");
  }
  GgufPtr gguf(gguf_init_from_file(path.c_str(), {.no_alloc = true, .ctx = nullptr}));
  if (!gguf) return InvalidArgument("'" + path + "' is a corrupt GGUF file (header unreadable)");
  gguf_context* g = gguf.get();
  GgufSummary s;
  for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
    const auto size = static_cast<int64_t>(gguf_get_tensor_size(g, i));
    if (size < 0 || __builtin_add_overflow(s.weights_bytes, size, &s.weights_bytes)) {
      return Corrupt(path, "its tensors add up to more than 2^63 bytes");
    }
    if (std::strcmp(gguf_get_tensor_name(g, i), "cls.output.weight") == 0) {
      s.has_classifier = true;
    }
  }
  if (int64_t k = gguf_find_key(g, "general.architecture"); k >= 0) {
    if (gguf_get_kv_type(g, k) != GGUF_TYPE_STRING) {
      return Corrupt(path, "general.architecture is not a string");
    }
    s.architecture = gguf_get_val_str(g, k);
    if (!IsValidUtf8(s.architecture)) {
      return Corrupt(path, "general.architecture \"" + Abbreviate(ToValidUtf8(s.architecture)) +
                               "\" is not UTF-8 text");
    }
  }
  const std::string& a = s.architecture;
  MMS_ASSIGN_OR_RETURN(s.n_layer, U32(g, path, a + ".block_count", 0, kMaxLayers));
  MMS_ASSIGN_OR_RETURN(s.n_embd, U32(g, path, a + ".embedding_length", 0, kMaxWidth));
  MMS_ASSIGN_OR_RETURN(s.n_head, U32(g, path, a + ".attention.head_count", 1, kMaxWidth));
  MMS_ASSIGN_OR_RETURN(s.n_head_kv,
                       U32(g, path, a + ".attention.head_count_kv", s.n_head, kMaxWidth));
  MMS_ASSIGN_OR_RETURN(s.n_ctx_train,
                       U32(g, path, a + ".context_length", 0, int64_t{UINT32_MAX}));
  MMS_RETURN_IF_ERROR(CheckVocabulary(g, path, s.n_vocab));
  return s;
}

bool IsEncoderArchitecture(const std::string& architecture) {
  static const char* const kEncoders[] = {"bert",         "nomic-bert", "nomic-bert-moe",
                                          "jina-bert-v2", "t5encoder",  "modern-bert",
                                          "neo-bert"};
  for (const char* e : kEncoders) {
    if (architecture == e) return true;
  }
  return false;
}

std::string TaskFor(const GgufSummary& gguf) {
  if (gguf.has_classifier) return "rerank";
  return IsEncoderArchitecture(gguf.architecture) ? "embed" : "generate";
}

}  // namespace mmserve
