#include "common/float16.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace mmserve {
namespace {

TEST(Float16Test, HalfRoundTripsExactValuesAndRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);                     // the largest half
  EXPECT_EQ(FloatToHalf(1e6f), 0x7C00);                         // overflow: infinity
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);        // the smallest subnormal
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // a tie: to even (down)
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // a tie: to even (up)
  for (uint16_t h : {0x0000, 0x3C00, 0x3555, 0x7BFF, 0x0001, 0x8400}) {
    EXPECT_EQ(FloatToHalf(HalfToFloat(h)), h) << h;
  }
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Float16Test, Bfloat16KeepsTheTopBitsRoundedToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-3.5f)), -3.5f);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // a tie: to even
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace mmserve
