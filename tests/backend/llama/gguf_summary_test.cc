#include "backend/llama/gguf_summary.h"

#include <gguf.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/models.h"
#include "testing/paths.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;

// Tiny GGUF files written with llama.cpp's gguf-py (the fuzzer's seeds): a BERT header with six
// tokens, and the same with one token twice.
std::string Seed(const std::string& name) {
  return testing::SourceDir() + "/tests/fuzz/corpus/gguf_fuzzer/" + name;
}

TEST(GgufSummaryTest, ReadsTheHeaderOfAValidFile) {
  auto s = ReadGguf(Seed("tiny"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->architecture, "bert");
  EXPECT_EQ(s->n_vocab, 6);
  EXPECT_EQ(s->n_layer, 1);
  EXPECT_EQ(s->n_embd, 4);
  EXPECT_EQ(s->weights_bytes, 6 * 4 * 4);
}

TEST(GgufSummaryTest, AVocabularyWithATokenTwiceIsRefusedWithBothEntries) {
  auto s = ReadGguf(Seed("dup_token"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("dup_token"));
  EXPECT_THAT(s.status().message(),
              HasSubstr("tokenizer.ggml.tokens has the token \"a\" twice (entries 4 and 5)"));
}

TEST(GgufSummaryTest, ImplausibleHyperparametersAndBrokenFilesAreRefused) {
  testing::TempDir dir;
  std::string bytes = testing::ReadFile(Seed("tiny"));
  // bert.block_count is a u32 (type 4) of 1: make it 2^32 - 1.
  const std::string key = "bert.block_count";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  std::string huge = bytes;
  huge.replace(at + key.size() + 4, 4, std::string(4, '\xff'));
  auto s = ReadGguf(dir.Write("huge.gguf", huge).string());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("bert.block_count is 4294967295"));

  std::string arch = bytes;
  arch.replace(arch.find("bert"), 4, "\xff\xfe\xfd\xfc");
  s = ReadGguf(dir.Write("arch.gguf", arch).string());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("is not UTF-8 text"));

  s = ReadGguf(dir.Write("cut.gguf", bytes.substr(0, 100)).string());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("corrupt GGUF"));

  s = ReadGguf(dir.Write("text.gguf", "not a model").string());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("bad magic"));
}

// A file cut inside its tensor data (a download stopped early) passes llama.cpp's header reader
// and fails only at load ("data is not within the file bounds"): refused here, naming the tensor.
TEST(GgufSummaryTest, AFileCutInsideItsTensorDataIsRefused) {
  testing::TempDir dir;
  const std::string bytes = testing::ReadFile(testing::GeneratedModel("bert-tiny.gguf"));
  ASSERT_TRUE(ReadGguf(dir.Write("whole.gguf", bytes).string()).ok());
  for (const double share : {0.12, 0.55, 0.99}) {
    const auto cut = static_cast<size_t>(static_cast<double>(bytes.size()) * share);
    auto s = ReadGguf(dir.Write("cut.gguf", bytes.substr(0, cut)).string());
    ASSERT_FALSE(s.ok()) << share;
    EXPECT_THAT(s.status().message(), HasSubstr("it is cut short: the tensor '")) << share;
    EXPECT_THAT(s.status().message(), HasSubstr("of a file of " + std::to_string(cut) + " bytes"));
  }
  // One byte short of the last tensor's end is enough.
  EXPECT_FALSE(ReadGguf(dir.Write("short.gguf", bytes.substr(0, bytes.size() - 1)).string()).ok());
}

// The header is read in place, not by llama.cpp's reader: both must say the same of real models.
TEST(GgufSummaryTest, AgreesWithLlamaCppsOwnReaderOnTheGeneratedModels) {
  for (const char* file : {"bert-tiny.gguf", "rerank-tiny.gguf", "llama-tiny.gguf"}) {
    const std::string path = testing::GeneratedModel(file);
    auto s = ReadGguf(path);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    gguf_context* g = gguf_init_from_file(path.c_str(), {.no_alloc = true, .ctx = nullptr});
    ASSERT_NE(g, nullptr) << file;
    int64_t bytes = 0;
    bool classifier = false;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
      bytes += static_cast<int64_t>(gguf_get_tensor_size(g, i));
      classifier |= std::string(gguf_get_tensor_name(g, i)) == "cls.output.weight";
    }
    EXPECT_EQ(s->weights_bytes, bytes) << file;
    EXPECT_EQ(s->has_classifier, classifier) << file;
    EXPECT_EQ(s->architecture, gguf_get_val_str(g, gguf_find_key(g, "general.architecture")));
    EXPECT_EQ(s->n_vocab, gguf_get_arr_n(g, gguf_find_key(g, "tokenizer.ggml.tokens"))) << file;
    const int64_t layers = gguf_find_key(g, (s->architecture + ".block_count").c_str());
    EXPECT_EQ(s->n_layer, gguf_get_val_u32(g, layers)) << file;
    gguf_free(g);
  }
}

// A GGUF file built by hand: version, key-value pairs (already encoded) and F32 tensors.
struct Gguf {
  uint32_t version = 3;
  std::vector<std::string> kvs;
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    uint32_t type = 0;  // F32
    uint64_t offset = 0;
  };
  std::vector<Tensor> tensors;
  bool data = true;  // padding and room for the tensors' data after the table

  template <typename T>
  static void Put(std::string& out, T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
  static void PutString(std::string& out, const std::string& v) {
    Put<uint64_t>(out, v.size());
    out += v;
  }
  static std::string U32(const std::string& key, uint32_t v) {
    std::string out;
    PutString(out, key);
    Put<uint32_t>(out, 4);
    Put(out, v);
    return out;
  }
  static std::string Str(const std::string& key, const std::string& v) {
    std::string out;
    PutString(out, key);
    Put<uint32_t>(out, 8);
    PutString(out, v);
    return out;
  }
  std::string Bytes() const {
    std::string out = "GGUF";
    Put(out, version);
    Put<uint64_t>(out, tensors.size());
    Put<uint64_t>(out, kvs.size());
    for (const auto& kv : kvs) out += kv;
    for (const auto& t : tensors) {
      PutString(out, t.name);
      Put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
      for (int64_t d : t.dims) Put(out, d);
      Put(out, t.type);
      Put(out, t.offset);
    }
    if (!data) return out;
    out.resize((out.size() + 31) / 32 * 32, '\0');
    return out + std::string(4096, '\0');
  }
};

// What llama.cpp's gguf reader refuses, this one refuses too (before llama.cpp sees the file);
// what it accepts, this one accepts with the same bytes.
TEST(GgufSummaryTest, RefusesWhatLlamaCppsReaderRefuses) {
  testing::TempDir dir;
  const auto both = [&](const std::string& name, const Gguf& file) {
    const std::string path = dir.Write(name, file.Bytes()).string();
    gguf_context* g = gguf_init_from_file(path.c_str(), {.no_alloc = true, .ctx = nullptr});
    const bool llama_ok = g != nullptr;
    if (g) gguf_free(g);
    auto s = ReadGguf(path);
    EXPECT_EQ(s.ok(), llama_ok) << name << ": " << s.status().ToString();
    return s;
  };
  Gguf good;
  good.kvs = {Gguf::Str("general.architecture", "bert"), Gguf::U32("bert.block_count", 2)};
  good.tensors = {{"a", {4, 2}, 0, 0}, {"b", {3}, 0, 32}};
  auto s = both("good.gguf", good);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->weights_bytes, 4 * 2 * 4 + 3 * 4);
  EXPECT_EQ(s->n_layer, 2);

  Gguf bad = good;
  bad.kvs.push_back(Gguf::U32("bert.block_count", 3));
  EXPECT_THAT(both("dupkey.gguf", bad).status().message(), HasSubstr("appears twice"));
  bad = good;
  bad.tensors[1].offset = 16;  // not where the first tensor's padded bytes end
  EXPECT_THAT(both("offset.gguf", bad).status().message(), HasSubstr("at offset 16, not 32"));
  bad = good;
  bad.tensors[1].type = 4;  // Q4_2: removed from ggml
  EXPECT_THAT(both("type.gguf", bad).status().message(), HasSubstr("has the type 4"));
  bad = good;
  bad.tensors[1].name = "a";
  EXPECT_THAT(both("dupname.gguf", bad).status().message(), HasSubstr("appears twice"));
  bad = good;
  bad.tensors[0].name = std::string("a\0x", 3);  // a C string for llama.cpp: "a", as the next
  bad.tensors[1].name = std::string("a\0y", 3);
  EXPECT_THAT(both("nulname.gguf", bad).status().message(), HasSubstr("appears twice"));
  bad = good;
  bad.tensors[1].name = std::string(64, 'n');
  EXPECT_THAT(both("longname.gguf", bad).status().message(), HasSubstr("too long"));
  bad = good;
  bad.tensors[0].dims = {4, -2};
  EXPECT_THAT(both("negative.gguf", bad).status().message(), HasSubstr("impossible shape"));
  bad = good;
  bad.data = false;  // the file ends with the table, before the aligned start of the data
  EXPECT_THAT(both("nodata.gguf", bad).status().message(), HasSubstr("before its tensor data"));
  bad = good;
  bad.kvs.assign(70000, Gguf::U32("k", 1));  // llama.cpp would read them (and refuse the twins)
  auto many = ReadGguf(dir.Write("many.gguf", bad.Bytes()).string());
  EXPECT_THAT(many.status().message(), HasSubstr("70000 keys and 2 tensors (at most 65536"));
  bad = good;
  bad.version = 1;
  EXPECT_THAT(both("v1.gguf", bad).status().message(), HasSubstr("GGUF version 1"));
  bad = good;
  bad.kvs.push_back(Gguf::U32("general.alignment", 24));
  EXPECT_THAT(both("align.gguf", bad).status().message(), HasSubstr("not a power of 2"));
  bad = good;
  bad.kvs.push_back(Gguf::Str("general.alignment", "32"));
  EXPECT_THAT(both("aligntype.gguf", bad).status().message(), HasSubstr("not a u32"));
  // llama.cpp finds keys as C strings: this is its general.alignment, of the wrong type.
  bad = good;
  bad.kvs.push_back(Gguf::Str(std::string("general.alignment\0\0\0", 20), "32"));
  EXPECT_THAT(both("nulkey.gguf", bad).status().message(), HasSubstr("holds a NUL byte"));
}

// A summary is kept while the file stays the same, and read again once it changes: a model file
// replaced in place (same path) is never judged by its predecessor's header.
TEST(GgufSummaryTest, AKeptSummaryFollowsTheFile) {
  testing::TempDir dir;
  const std::string bytes = testing::ReadFile(Seed("tiny"));
  const std::string path = dir.Write("m.gguf", bytes).string();
  ASSERT_TRUE(ReadGguf(path).ok());
  ASSERT_TRUE(ReadGguf(path).ok());  // kept
  // The same size, another header: the duplicate-token file is rewritten in place.
  const std::string dup = testing::ReadFile(Seed("dup_token"));
  dir.Write("m.gguf", dup);
  auto s = ReadGguf(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("twice"));
  dir.Write("m.gguf", bytes);
  EXPECT_TRUE(ReadGguf(path).ok());  // an error is not kept either
}

}  // namespace
}  // namespace mmserve
