#include "common/tensor.h"

#include <gtest/gtest.h>

namespace mmserve {
namespace {

TEST(TensorTest, DataTypeNamesRoundTrip) {
  for (DataType t : kAllDataTypes) {
    EXPECT_EQ(ParseDataType(DataTypeName(t)), t);
  }
  EXPECT_FALSE(ParseDataType("FLOAT").has_value());
  EXPECT_EQ(DataTypeSize(DataType::kBf16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0u);
}

TEST(TensorTest, ValidateChecksByteSizeAgainstShape) {
  Tensor ok("x", DataType::kInt32, {2, 2}, std::string(16, '\0'));
  EXPECT_TRUE(ok.Validate().ok());
  Tensor bad("x", DataType::kInt32, {2, 2}, std::string(12, '\0'));
  EXPECT_EQ(bad.Validate().message(), "input 'x': shape [2,2] of INT32 needs 16 bytes, found 12");
}

TEST(TensorTest, BytesElementsAreLengthPrefixed) {
  std::string data;
  Tensor::AppendBytesElement(data, "ab");
  Tensor::AppendBytesElement(data, "");
  Tensor t("s", DataType::kBytes, {2}, data);
  ASSERT_TRUE(t.Validate().ok());
  EXPECT_EQ(t.BytesElements(), (std::vector<std::string_view>{"ab", ""}));

  Tensor truncated("s", DataType::kBytes, {2}, data.substr(0, data.size() - 1));
  EXPECT_FALSE(truncated.Validate().ok());
  Tensor wrong_count("s", DataType::kBytes, {3}, data);
  EXPECT_EQ(wrong_count.Validate().message(),
            "input 's': shape [3] needs 3 BYTES elements, found 2");
}

TEST(TensorTest, ShapeMatchingHonoursVariableDimensions) {
  EXPECT_TRUE(ShapeMatches({-1, 4}, {7, 4}));
  EXPECT_FALSE(ShapeMatches({-1, 4}, {7, 5}));
  EXPECT_FALSE(ShapeMatches({-1}, {1, 1}));
  EXPECT_EQ(ElementCount({2, 3, 4}), 24);
  EXPECT_FALSE(ElementCount({-1, 3}).has_value());
}

}  // namespace
}  // namespace mmserve
