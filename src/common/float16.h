// IEEE half precision (FP16) and bfloat16 (BF16) to and from float, rounding to nearest even:
// what a tensor codec needs to read and write the 16-bit datatypes.
#pragma once

#include <cstdint>

namespace mmserve {

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t h);
uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t b);

}  // namespace mmserve
