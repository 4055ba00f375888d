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

}  // namespace
}  // namespace mmserve
