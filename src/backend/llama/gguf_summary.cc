#include "backend/llama/gguf_summary.h"

#include <gguf.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

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
  // An open-addressing set of entry numbers, at most half full (so every probe ends): one
  // allocation for the whole vocabulary instead of a node per token.
  size_t capacity = 2;
  while (capacity < 2 * n) capacity *= 2;
  constexpr uint32_t kEmpty = UINT32_MAX;
  std::vector<uint32_t> slots(capacity, kEmpty);
  // As llama.cpp reads them: C strings.
  const auto token = [&](size_t i) { return std::string_view(gguf_get_arr_str(g, k, i)); };
  for (size_t i = 0; i < n; ++i) {
    const std::string_view t = token(i);
    size_t at = std::hash<std::string_view>()(t) & (capacity - 1);
    while (slots[at] != kEmpty && token(slots[at]) != t) at = (at + 1) & (capacity - 1);
    if (slots[at] != kEmpty) {
      return Corrupt(path, "tokenizer.ggml.tokens has the token \"" +
                               Abbreviate(ToValidUtf8(t)) + "\" twice (entries " +
                               std::to_string(slots[at]) + " and " + std::to_string(i) + ")");
    }
    slots[at] = static_cast<uint32_t>(i);
  }
  n_vocab = static_cast<int64_t>(n);
  return Status::Ok();
}

// What identifies one version of a file: a rewrite, a rename over it or a touch changes it.
using FileStamp = std::tuple<dev_t, ino_t, off_t, int64_t, int64_t>;

std::optional<FileStamp> StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  const auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; };
  return FileStamp{st.st_dev, st.st_ino, st.st_size, ns(st.st_mtim), ns(st.st_ctim)};
}

Result<GgufSummary> ReadGgufUncached(const std::string& path) {
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

}  // namespace

Result<GgufSummary> ReadGguf(const std::string& path) {
  constexpr size_t kMaxKept = 4096;
  static std::mutex mu;
  static std::map<std::string, std::pair<FileStamp, GgufSummary>> kept;
  const auto stamp = StampOf(path);
  if (stamp) {
    std::lock_guard lock(mu);
    if (auto it = kept.find(path); it != kept.end() && it->second.first == *stamp) {
      return it->second.second;
    }
  }
  auto summary = ReadGgufUncached(path);
  // Kept only if the file did not change while it was read.
  if (summary.ok() && stamp && StampOf(path) == stamp) {
    std::lock_guard lock(mu);
    if (kept.size() >= kMaxKept) kept.clear();
    kept[path] = {*stamp, *summary};
  }
  return summary;
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
