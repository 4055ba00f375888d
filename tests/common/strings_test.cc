#include "common/strings.h"

#include <csignal>

#include <gtest/gtest.h>

namespace mmserve {
namespace {

TEST(StringsTest, ClosestMatchFindsLikelyTypos) {
  const std::vector<std::string> keys = {"timeout_ms", "thread_num", "max_batch"};
  EXPECT_EQ(ClosestMatch("timeout", keys), "timeout_ms");
  EXPECT_EQ(ClosestMatch("thread_nums", keys), "thread_num");
  EXPECT_EQ(ClosestMatch("completely_else", keys), "");
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

// RFC 4648 §10 test vectors.
TEST(StringsTest, Base64EncodeMatchesTheRfcVectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode(std::string("\xff\x00\x80", 3)), "/wCA");
}

TEST(StringsTest, Base64DecodeReadsTheRfcVectorsAndRefusesEverythingElse) {
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    EXPECT_EQ(Base64Decode(text), bytes) << text;
    std::string unpadded = text;
    while (!unpadded.empty() && unpadded.back() == '=') unpadded.pop_back();
    EXPECT_EQ(Base64Decode(unpadded), bytes) << unpadded;
  }
  std::string all(256, '\0');
  for (int i = 0; i < 256; ++i) all[static_cast<size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(Base64Decode(Base64Encode(all)), all);
  for (const char* bad : {"Z", "Zg=", "Zg===", "Z===", "Zm9v\n", "Zm 9v", "Zm9v=", "Zh==",
                          "Zm9-", "=Zm9"}) {
    EXPECT_EQ(Base64Decode(bad), std::nullopt) << bad;
  }
}

TEST(StringsTest, Utf8IsCheckedStrictlyAndRepairedWithReplacementCharacters) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut short
  EXPECT_EQ(ToValidUtf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(ToValidUtf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xfe\xfd\xe2\x82")));
}

TEST(StringsTest, AbbreviateCutsOnACharacterBoundary) {
  EXPECT_EQ(Abbreviate("short", 10), "short");
  EXPECT_EQ(Abbreviate("abcdefgh", 4), "abcd...");
  EXPECT_EQ(Abbreviate("ab\xc3\xa9", 3), "ab...");  // not half of the é
}

TEST(StringsTest, SignalNameSpellsKnownSignalsAndNumbersTheRest) {
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(SIGSYS), "SIGSYS");
  EXPECT_EQ(SignalName(77), "signal 77");
}

TEST(StringsTest, EscapeControlEscapesC0C1AndDelAndLeavesTextAlone) {
  EXPECT_EQ(EscapeControl("plain text, é and 🎉"), "plain text, é and 🎉");
  EXPECT_EQ(EscapeControl("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeControl("\x1b[2J\x07\x7f"), "\\x1b[2J\\x07\\x7f");
  EXPECT_EQ(EscapeControl(std::string("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(EscapeControl("\xc2\x9b" "31m"), "\\u009b31m");  // C1 CSI
  EXPECT_EQ(EscapeControl("\xc2\xa0"), "\xc2\xa0") << "U+00A0 is not a control";
  EXPECT_EQ(EscapeControl("\xc2"), "\xc2") << "a lone lead byte at the end";
}

TEST(StringsTest, ParseInt64AcceptsWholeIntegersThatFitAndNothingElse) {
  EXPECT_EQ(ParseInt64("42"), 42);
  EXPECT_EQ(ParseInt64("-7"), -7);
  EXPECT_EQ(ParseInt64("+7"), 7);
  EXPECT_EQ(ParseInt64("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(ParseInt64("-9223372036854775808"), INT64_MIN);
  EXPECT_FALSE(ParseInt64("9223372036854775808"));
  EXPECT_FALSE(ParseInt64("99999999999999999999"));
  EXPECT_FALSE(ParseInt64(std::string(300000, '9')));
  for (const char* bad : {"", "+", "-", "++1", "1 ", " 1", "1x", "0x10", "1.0"}) {
    EXPECT_FALSE(ParseInt64(bad)) << bad;
  }
  EXPECT_EQ(CheckedMul(3, 4), 12);
  EXPECT_FALSE(CheckedMul(INT64_MAX, 2));
  EXPECT_FALSE(CheckedMul(int64_t{1} << 62, -4));
}

}  // namespace
}  // namespace mmserve
