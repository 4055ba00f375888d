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

TEST(StatusTest, APermanentStatusIsAnErrorWhoseCopiesShareOnePayload) {
  static const Status kGone = Status::Permanent(StatusCode::kCancelled, "gone");
  const Status copy = kGone;
  EXPECT_FALSE(copy.ok());
  EXPECT_EQ(copy.ToString(), "Cancelled: gone");
  EXPECT_EQ(copy.message().data(), kGone.message().data());
  EXPECT_EQ(copy.WithContext("model 'm'").ToString(), "Cancelled: model 'm': gone");
  EXPECT_TRUE(Status::Permanent(StatusCode::kOk, "ignored").ok());
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
