// The format and size of an encoded image, read from its header before anything decodes it:
// mmserve decodes only JPEG, PNG, BMP and WebP (not every format OpenCV's imgcodecs knows), and
// refuses an image over its pixel limit before OpenCV allocates the pixels (OpenCV's own limit
// is fixed at library load, at 2^30 pixels).
#pragma once

#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace mmserve {

enum class ImageFormat { kJpeg, kPng, kBmp, kWebp };
std::string_view ImageFormatName(ImageFormat format);  // "JPEG", ...

struct ImageHeader {
  ImageFormat format = ImageFormat::kJpeg;
  int64_t width = 0, height = 0;
};

// The header of `bytes`, or an error saying why it is not a JPEG, PNG, BMP or WebP image with a
// size (a zero width or height is an error). Reads at most the bytes given; linear in them.
Result<ImageHeader> ReadImageHeader(std::string_view bytes);

}  // namespace mmserve
