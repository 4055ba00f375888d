#include "common/status.h"

#include <gtest/gtest.h>

#include "common/result.h"

namespace mmserve {
namespace {

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessageWithContext) {
  Status s = NotFound("model 'x'").WithContext("loading");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: loading: model 'x'");
}

Result<int> Half(int n) {
  if (n % 2) return InvalidArgument("odd");
  return n / 2;
}

Result<int> Quarter(int n) {
  MMS_ASSIGN_OR_RETURN(int half, Half(n));
  return Half(half);
}

TEST(ResultTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_TRUE(Quarter(8).status().ok());
}

}  // namespace
}  // namespace mmserve
