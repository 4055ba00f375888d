#include "backend/infer_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using ::testing::HasSubstr;

TEST(InferRequestTest, IntParamChecksTypeAndRangeAndNeverNarrows) {
  const RequestParams p = {{"n", int64_t{7}},
                           {"big", int64_t{(int64_t{1} << 32) + 3}},
                           {"whole", 5.0},
                           {"half", 2.5},
                           {"huge", 1e300},
                           {"text", std::string("7")}};
  EXPECT_EQ(*IntParam(p, "absent", 3, 1, 10), 3);
  EXPECT_EQ(*IntParam(p, "n", 3, 1, 10), 7);
  EXPECT_EQ(*IntParam(p, "whole", 3, 1, 10), 5);
  auto r = IntParam(p, "big", 128, 1, INT32_MAX);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("parameter big: expected an integer from 1 to 2147483647, found 4294967299"));
  for (const char* bad : {"half", "huge", "text"}) {
    EXPECT_FALSE(IntParam(p, bad, 0, INT64_MIN, INT64_MAX).ok()) << bad;
  }
}

TEST(InferRequestTest, RealParamChecksTypeAndRange) {
  const RequestParams p = {{"t", 0.5}, {"i", int64_t{2}}, {"nan", std::nan("")},
                           {"flag", true}};
  EXPECT_DOUBLE_EQ(*RealParam(p, "absent", 1.0, 0, 1), 1.0);
  EXPECT_DOUBLE_EQ(*RealParam(p, "t", 1.0, 0, 1), 0.5);
  EXPECT_DOUBLE_EQ(*RealParam(p, "i", 1.0, 0, 10), 2.0);
  EXPECT_FALSE(RealParam(p, "i", 1.0, 0, 1).ok());
  EXPECT_FALSE(RealParam(p, "nan", 1.0, 0, 1).ok());
  auto r = RealParam(p, "flag", 1.0, 0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("parameter flag: expected a number from 0 to 1"));
}

}  // namespace
}  // namespace mmserve
