#include "common/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using nlohmann::json;

TEST(JsonTest, ParseRefusesDocumentsNestedPastTheLimitBeforeBuildingThem) {
  JsonError error;
  EXPECT_EQ(ParseJson(std::string(64, '[') + std::string(64, ']'), &error).is_array(), true);
  EXPECT_EQ(error, JsonError::kNone);
  // 65 levels: one too many. 100 000 levels: refused the same way (no recursion anywhere).
  for (size_t depth : {65u, 100'000u}) {
    const json j = ParseJson(std::string(depth, '[') + std::string(depth, ']'), &error);
    EXPECT_TRUE(j.is_discarded());
    EXPECT_EQ(error, JsonError::kTooDeep) << depth;
  }
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 70; ++i) s += "{\"a\":";
    s += "1";
    for (int i = 0; i < 70; ++i) s += "}";
    return s;
  }();
  EXPECT_TRUE(ParseJson(objects, &error).is_discarded());
  EXPECT_EQ(error, JsonError::kTooDeep);
  EXPECT_THAT(DescribeJsonError(error), ::testing::HasSubstr("deeper than 64"));
}

TEST(JsonTest, ParseReportsSyntaxErrorsAndInvalidUtf8) {
  JsonError error;
  EXPECT_TRUE(ParseJson("{\"a\":", &error).is_discarded());
  EXPECT_EQ(error, JsonError::kSyntax);
  EXPECT_TRUE(ParseJson("\"\xff\"", &error).is_discarded());
  EXPECT_EQ(error, JsonError::kSyntax);
  EXPECT_EQ(ParseJson("{\"a\":[1,2]}", &error)["a"][1], 2);
}

TEST(JsonTest, ParseJsonObjectNamesTheFieldInEachRefusal) {
  EXPECT_EQ((*ParseJsonObject("{\"a\":1}", "request body"))["a"], 1);
  const auto deep = ParseJsonObject(std::string(100, '[') + std::string(100, ']'), "request body");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "request body: is nested deeper than 64 levels");
  for (const char* bad : {"[1]", "\"text\"", "{", ""}) {
    const auto r = ParseJsonObject(bad, "request body");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), "request body: expected a JSON object") << bad;
  }
}

TEST(JsonTest, DumpNeverThrowsOnInvalidUtf8AndQuoteIsBounded) {
  const json bad = {{"name", std::string("x\xff\xfey")}};
  EXPECT_EQ(DumpJson(bad), "{\"name\":\"x\xef\xbf\xbd\xef\xbf\xbdy\"}");
  EXPECT_EQ(QuoteJson(json(std::string(1'000'000, 'a'))).size(), 40u);
  EXPECT_EQ(QuoteJson(json::array({1, 2})), "[1,2]");
  EXPECT_THAT(QuoteJson(json(std::vector<int>(1000, 7))), ::testing::EndsWith("..."));
}

}  // namespace
}  // namespace mmserve
