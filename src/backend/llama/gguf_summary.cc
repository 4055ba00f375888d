#include "backend/llama/gguf_summary.h"

#include <fcntl.h>
#include <ggml.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "common/fd.h"
#include "common/strings.h"

namespace mmserve {
namespace {

// Far above any released model, far below where products of them could overflow int64.
constexpr int64_t kMaxLayers = 1 << 14;
constexpr int64_t kMaxWidth = 1 << 20;  // embedding width, heads
constexpr int64_t kMaxVocab = 1 << 24;
// Released models have tens of keys and up to a few thousand tensors; a file that claims more
// would only make the reader hold millions of entries.
constexpr uint64_t kMaxKeys = 1 << 16;
constexpr uint64_t kMaxTensors = 1 << 20;

Status Corrupt(const std::string& path, const std::string& what) {
  return InvalidArgument("'" + path + "' is a corrupt GGUF file: " + what);
}

// GGUF value types (gguf.h's enum gguf_type, as the format fixes them).
enum GgufType : uint32_t {
  kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64, kTypeCount
};
constexpr size_t kScalarSize[kTypeCount] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

// A read-only mapping of a whole file (only the pages read are touched).
struct Mapping {
  const char* data = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (data) ::munmap(const_cast<char*>(data), size);
  }
};

// A bounds-checked little-endian reader over [data, data + size): every read either succeeds
// whole or fails, and never reads past the end.
class Cursor {
 public:
  Cursor(const char* data, size_t size) : at_(data), end_(data + size), begin_(data) {}
  template <typename T>
  bool Read(T& out) {
    if (static_cast<size_t>(end_ - at_) < sizeof(T)) return false;
    std::memcpy(&out, at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool String(std::string_view& out) {
    uint64_t n = 0;
    if (!Read(n) || n > static_cast<uint64_t>(end_ - at_)) return false;
    out = std::string_view(at_, n);
    at_ += n;
    return true;
  }
  bool Skip(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - at_)) return false;
    at_ += n;
    return true;
  }
  size_t offset() const { return static_cast<size_t>(at_ - begin_); }
  size_t left() const { return static_cast<size_t>(end_ - at_); }

 private:
  const char* at_;
  const char* end_;
  const char* begin_;
};

// One key of the key-value section: its type and, for a u32, its value.
struct Key {
  GgufType type;
  GgufType element = kTypeCount;  // a list's elements
  uint32_t u32 = 0;
};

// What ReadGgufUncached needs of the key-value section.
struct KeyValues {
  std::map<std::string_view, Key> keys;  // every key
  std::string_view architecture;
  std::vector<std::string_view> tokens;  // tokenizer.ggml.tokens, when a list of strings
};

// Reads one value (not a list) for `key`, keeping what KeyValues wants.
bool ReadValue(Cursor& c, std::string_view key, Key& k, KeyValues& kv) {
  if (k.type == kString) {
    std::string_view v;
    if (!c.String(v)) return false;
    if (key == "general.architecture") kv.architecture = v;
    return true;
  }
  if (k.type == kU32) return c.Read(k.u32);
  return c.Skip(kScalarSize[k.type]);
}

// The key-value section, checked as llama.cpp's gguf reader checks it (non-empty, unique keys,
// known types, arrays of scalars or strings) and bounded by the file.
Result<KeyValues> ReadKeyValues(Cursor& c, uint64_t n_kv, const std::string& path) {
  KeyValues kv;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string_view key;
    uint32_t type = 0;
    if (!c.String(key) || !c.Read(type)) return Corrupt(path, "its key-value section is cut short");
    if (key.empty()) return Corrupt(path, "key " + std::to_string(i) + " is empty");
    // llama.cpp looks keys up as C strings: "general.alignment\0x" would be its
    // general.alignment, and this reader's an unknown key (found by gguf_fuzzer).
    if (key.find('\0') != std::string_view::npos) {
      return Corrupt(path, "key " + std::to_string(i) + " holds a NUL byte");
    }
    if (type >= kTypeCount) return Corrupt(path, "a key has the unknown type " + std::to_string(type));
    auto [entry, fresh] = kv.keys.emplace(key, Key{.type = static_cast<GgufType>(type)});
    if (!fresh) {
      return Corrupt(path, "the key " + Abbreviate(ToValidUtf8(key), 80) + " appears twice");
    }
    if (type != kArray) {
      if (!ReadValue(c, key, entry->second, kv)) {
        return Corrupt(path, "its key-value section is cut short");
      }
      continue;
    }
    uint32_t element = 0;
    uint64_t n = 0;
    if (!c.Read(element) || !c.Read(n)) return Corrupt(path, "its key-value section is cut short");
    if (element >= kTypeCount || element == kArray) {
      return Corrupt(path, "the list " + Abbreviate(ToValidUtf8(key), 80) + " has elements of type " +
                               std::to_string(element));
    }
    entry->second.element = static_cast<GgufType>(element);
    const bool tokens = key == "tokenizer.ggml.tokens" && element == kString;
    if (element != kString) {
      if (n > c.left() / kScalarSize[element] || !c.Skip(n * kScalarSize[element])) {
        return Corrupt(path, "its key-value section is cut short");
      }
      continue;
    }
    if (n > c.left() / sizeof(uint64_t)) return Corrupt(path, "its key-value section is cut short");
    if (tokens) {
      if (n > static_cast<uint64_t>(kMaxVocab)) {
        return Corrupt(path, "tokenizer.ggml.tokens has " + std::to_string(n) + " tokens");
      }
      kv.tokens.reserve(n);  // each at least its 8-byte length: bounded by the file
    }
    for (uint64_t e = 0; e < n; ++e) {
      std::string_view v;
      if (!c.String(v)) return Corrupt(path, "its key-value section is cut short");
      if (tokens) kv.tokens.push_back(v);
    }
  }
  return kv;
}

// Where the last tensor's data ends, from the start of the data section, and its name.
struct DataEnd {
  uint64_t bytes = 0;
  std::string tensor;
};

// The tensor table: each tensor's bytes added to `s.weights_bytes`, checked as llama.cpp's gguf
// reader checks it (names, dimensions, types, block multiples, sizes, offsets in order).
Status ReadTensors(Cursor& c, uint64_t n_tensors, uint64_t alignment, const std::string& path,
                   GgufSummary& s, DataEnd& end) {
  std::unordered_set<std::string_view> names;
  uint64_t expected_offset = 0;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    std::string_view name;
    uint32_t n_dims = 0;
    if (!c.String(name) || !c.Read(n_dims)) return Corrupt(path, "its tensor table is cut short");
    const std::string shown = Abbreviate(ToValidUtf8(name), 80);
    if (name.size() >= GGML_MAX_NAME) return Corrupt(path, "the tensor name " + shown + " is too long");
    // llama.cpp keeps a name as a C string: what follows a NUL byte is not part of it.
    name = name.substr(0, name.find('\0'));
    if (!names.insert(name).second) return Corrupt(path, "the tensor " + shown + " appears twice");
    if (n_dims > GGML_MAX_DIMS) return Corrupt(path, "the tensor " + shown + " has " + std::to_string(n_dims) + " dimensions");
    int64_t ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      if (!c.Read(ne[d])) return Corrupt(path, "its tensor table is cut short");
      if (ne[d] < 0 || (ne[d] > 0 && __builtin_mul_overflow(elements, ne[d], &elements))) {
        return Corrupt(path, "the tensor " + shown + " has an impossible shape");
      }
    }
    if (std::find(ne, ne + GGML_MAX_DIMS, 0) != ne + GGML_MAX_DIMS) elements = 0;
    uint32_t type = 0;
    uint64_t offset = 0;
    if (!c.Read(type) || !c.Read(offset)) return Corrupt(path, "its tensor table is cut short");
    const auto t = static_cast<ggml_type>(type);
    const int64_t block = type < GGML_TYPE_COUNT ? ggml_blck_size(t) : 0;
    if (block <= 0 || ggml_type_size(t) == 0 || ne[0] % block != 0) {
      return Corrupt(path, "the tensor " + shown + " has the type " + std::to_string(type) +
                               ", unknown or not fitting its rows");
    }
    int64_t bytes = 0;
    if (__builtin_mul_overflow(elements / block, static_cast<int64_t>(ggml_type_size(t)), &bytes) ||
        __builtin_add_overflow(s.weights_bytes, bytes, &s.weights_bytes)) {
      return Corrupt(path, "its tensors add up to more than 2^63 bytes");
    }
    if (offset != expected_offset) {
      return Corrupt(path, "the tensor " + shown + " is at offset " + std::to_string(offset) +
                               ", not " + std::to_string(expected_offset));
    }
    const uint64_t padded = (static_cast<uint64_t>(bytes) + alignment - 1) / alignment * alignment;
    if (__builtin_add_overflow(expected_offset, padded, &expected_offset)) {
      return Corrupt(path, "its tensors add up to more than 2^64 bytes");
    }
    // Cannot overflow: offset + padded did not, and bytes <= padded.
    end = {offset + static_cast<uint64_t>(bytes), std::string(name)};
    if (name == "cls.output.weight") s.has_classifier = true;
  }
  return Status::Ok();
}

// A u32 hyperparameter within [0, max]: `fallback` when absent or of another type.
Result<int64_t> U32(const KeyValues& kv, const std::string& path, const std::string& key,
                    int64_t fallback, int64_t max) {
  const auto it = kv.keys.find(key);
  if (it == kv.keys.end() || it->second.type != kU32) return fallback;
  const int64_t v = it->second.u32;
  if (v > max) {
    return Corrupt(path, Abbreviate(ToValidUtf8(key), 80) + " is " + std::to_string(v) +
                             " (at most " + std::to_string(max) + " is plausible)");
  }
  return v;
}

// llama.cpp builds token → id and id → token maps and asserts that they have the same size.
Status CheckVocabulary(const KeyValues& kv, const std::string& path, int64_t& n_vocab) {
  const auto it = kv.keys.find("tokenizer.ggml.tokens");
  if (it == kv.keys.end()) return Status::Ok();  // llama.cpp reports a missing vocabulary itself
  if (it->second.type != kArray || it->second.element != kString) {
    return Corrupt(path, "tokenizer.ggml.tokens is not a list of strings");
  }
  const size_t n = kv.tokens.size();
  if (n == 0 || static_cast<int64_t>(n) > kMaxVocab) {
    return Corrupt(path, "tokenizer.ggml.tokens has " + std::to_string(n) + " tokens");
  }
  // An open-addressing set of entry numbers, at most half full (so every probe ends): one
  // allocation for the whole vocabulary instead of a node per token.
  size_t capacity = 2;
  while (capacity < 2 * n) capacity *= 2;
  constexpr uint32_t kEmpty = UINT32_MAX;
  std::vector<uint32_t> slots(capacity, kEmpty);
  // As llama.cpp reads them: C strings (up to a NUL).
  const auto token = [&](size_t i) {
    const std::string_view t = kv.tokens[i];
    return t.substr(0, t.find('\0'));
  };
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

// Maps the file at `path`; an error names what failed.
Status MapFile(const std::string& path, Mapping& m) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return InvalidArgument("'" + path + "' cannot be opened: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size < 4) {
    return InvalidArgument("'" + path + "' is not a GGUF file (bad magic)");
  }
  void* at = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (at == MAP_FAILED) return InvalidArgument("'" + path + "' cannot be mapped: " + std::strerror(errno));
  m.data = static_cast<const char*>(at);
  m.size = static_cast<size_t>(st.st_size);
  return Status::Ok();
}

// Reads the header in place from a mapping of the file: no allocation per token or key (the
// llama.cpp reader it replaces took 15 ms per 30k-token file, most of it copying strings).
Result<GgufSummary> ReadGgufUncached(const std::string& path) {
  Mapping m;
  MMS_RETURN_IF_ERROR(MapFile(path, m));
  if (std::memcmp(m.data, "GGUF", 4) != 0) {
    return InvalidArgument("'" + path + "' is not a GGUF file (bad magic)");
  }
  Cursor c(m.data + 4, m.size - 4);
  uint32_t version = 0;
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.Read(version) || !c.Read(n_tensors) || !c.Read(n_kv)) {
    return InvalidArgument("'" + path + "' is a corrupt GGUF file (header unreadable)");
  }
  if (version < 2 || version > 3) {
    return Corrupt(path, "GGUF version " + std::to_string(version) + " (2 and 3 are read)");
  }
  if (n_kv > kMaxKeys || n_tensors > kMaxTensors) {
    return Corrupt(path, std::to_string(n_kv) + " keys and " + std::to_string(n_tensors) +
                             " tensors (at most " + std::to_string(kMaxKeys) + " and " +
                             std::to_string(kMaxTensors) + " are plausible)");
  }
  MMS_ASSIGN_OR_RETURN(KeyValues kv, ReadKeyValues(c, n_kv, path));
  uint64_t alignment = 32;  // GGUF_DEFAULT_ALIGNMENT
  if (auto it = kv.keys.find("general.alignment"); it != kv.keys.end()) {
    if (it->second.type != kU32) return Corrupt(path, "general.alignment is not a u32");
    alignment = it->second.u32;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return Corrupt(path, "general.alignment " + std::to_string(alignment) + " is not a power of 2");
    }
  }
  GgufSummary s;
  DataEnd end;
  MMS_RETURN_IF_ERROR(ReadTensors(c, n_tensors, alignment, path, s, end));
  // The data section starts at the next multiple of the alignment, inside the file, and every
  // tensor's bytes lie within the file (a download cut short passes every other check here,
  // and llama.cpp refuses it only after the load began).
  const uint64_t table_end = 4 + c.offset();
  const uint64_t data_start = (table_end + alignment - 1) / alignment * alignment;
  if (n_tensors > 0 && data_start > m.size) {
    return Corrupt(path, "it ends before its tensor data begins");
  }
  if (n_tensors > 0 && end.bytes > m.size - data_start) {
    return Corrupt(path, "it is cut short: the tensor '" + Abbreviate(ToValidUtf8(end.tensor), 80) +
                             "' ends at byte " + std::to_string(data_start + end.bytes) +
                             " of a file of " + std::to_string(m.size) + " bytes");
  }
  if (auto it = kv.keys.find("general.architecture"); it != kv.keys.end()) {
    if (it->second.type != kString) return Corrupt(path, "general.architecture is not a string");
    s.architecture = std::string(kv.architecture.substr(0, kv.architecture.find('\0')));
    if (!IsValidUtf8(s.architecture)) {
      return Corrupt(path, "general.architecture \"" + Abbreviate(ToValidUtf8(s.architecture)) +
                               "\" is not UTF-8 text");
    }
  }
  const std::string& a = s.architecture;
  MMS_ASSIGN_OR_RETURN(s.n_layer, U32(kv, path, a + ".block_count", 0, kMaxLayers));
  MMS_ASSIGN_OR_RETURN(s.n_embd, U32(kv, path, a + ".embedding_length", 0, kMaxWidth));
  MMS_ASSIGN_OR_RETURN(s.n_head, U32(kv, path, a + ".attention.head_count", 1, kMaxWidth));
  MMS_ASSIGN_OR_RETURN(s.n_head_kv,
                       U32(kv, path, a + ".attention.head_count_kv", s.n_head, kMaxWidth));
  MMS_ASSIGN_OR_RETURN(s.n_ctx_train,
                       U32(kv, path, a + ".context_length", 0, int64_t{UINT32_MAX}));
  MMS_RETURN_IF_ERROR(CheckVocabulary(kv, path, s.n_vocab));
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
