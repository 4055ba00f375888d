#include "backend/llama/gguf_summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;

// Tiny GGUF files written with llama.cpp's gguf-py (the fuzzer's seeds): a BERT header with six
// tokens, and the same with one token twice.
std::string Seed(const std::string& name) {
  return std::string(MMSERVE_SOURCE_DIR) + "/tests/fuzz/corpus/gguf_fuzzer/" + name;
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
