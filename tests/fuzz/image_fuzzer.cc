// Fuzzes the image pre-processing (backend/vision/image_preprocess.h) the way a request's IMAGE
// element reaches it: the header check, the strict JPEG decode (jpeg_decode.h) and OpenCV's
// decoders for the other three formats, then letterbox, colour, normalization and layout into a
// network row.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "backend/vision/image_preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const mmserve::ImagePreprocessor* pre = [] {
    mmserve::PreprocessConfig config;
    config.resize = mmserve::PreprocessConfig::Resize::kLetterbox;
    config.scale = 1.0 / 255;
    config.max_pixels = 4'000'000;  // keeps each input's decode small
    auto created = mmserve::ImagePreprocessor::Create(
        config, {"images", mmserve::DataType::kFp32, {-1, 3, 64, 64}});
    return created.ok() ? new mmserve::ImagePreprocessor(std::move(*created)) : nullptr;
  }();
  if (!pre) __builtin_trap();
  static std::string row(pre->row_bytes(), '\0');
  (void)pre->Run(std::string_view(reinterpret_cast<const char*>(data), size), row.data());
  return 0;
}
