#include "common/strings.h"

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

}  // namespace
}  // namespace mmserve
