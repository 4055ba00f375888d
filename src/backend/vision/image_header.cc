#include "backend/vision/image_header.h"

#include <cstdlib>
#include <optional>

namespace mmserve {
namespace {

// Big- and little-endian reads at `at`; the caller checked the bounds.
uint32_t Be16(std::string_view b, size_t at) {
  return (uint32_t{static_cast<uint8_t>(b[at])} << 8) | static_cast<uint8_t>(b[at + 1]);
}
uint32_t Be32(std::string_view b, size_t at) { return (Be16(b, at) << 16) | Be16(b, at + 2); }
uint32_t Le16(std::string_view b, size_t at) {
  return static_cast<uint8_t>(b[at]) | (uint32_t{static_cast<uint8_t>(b[at + 1])} << 8);
}
uint32_t Le24(std::string_view b, size_t at) {
  return Le16(b, at) | (uint32_t{static_cast<uint8_t>(b[at + 2])} << 16);
}
uint32_t Le32(std::string_view b, size_t at) { return Le16(b, at) | (Le16(b, at + 2) << 16); }

Status Truncated(std::string_view format) {
  return InvalidArgument(std::string(format) + " image whose header is truncated");
}

Result<ImageHeader> Jpeg(std::string_view b) {
  // Segments from the start-of-image marker to the start of scan: a frame header (SOFn) gives
  // the size. A file without an end-of-image marker after its scan is truncated: refused here,
  // before anything is allocated (the decoder, jpeg_decode.h, refuses what else is cut short).
  std::optional<ImageHeader> frame;
  size_t at = 2;
  while (at + 4 <= b.size()) {
    if (static_cast<uint8_t>(b[at]) != 0xFF) {
      return InvalidArgument("JPEG image with a corrupt marker");
    }
    const uint8_t marker = static_cast<uint8_t>(b[at + 1]);
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    at += 2;
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) continue;  // no length
    if (marker == 0xD9) break;                                           // end of image
    if (marker == 0xDA) {                                                // start of scan
      if (!frame) break;
      const size_t end = b.rfind("\xFF\xD9");
      if (end == std::string_view::npos || end < at) {
        return InvalidArgument("JPEG image that is truncated (no end-of-image marker)");
      }
      return *frame;
    }
    const uint32_t length = Be16(b, at);
    if (length < 2) return InvalidArgument("JPEG image with a corrupt segment length");
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      if (at + 7 > b.size()) return Truncated("JPEG");
      frame = ImageHeader{ImageFormat::kJpeg, Be16(b, at + 5), Be16(b, at + 3)};
    }
    at += length;
  }
  return InvalidArgument(frame ? "JPEG image that is truncated (no scan)"
                               : "JPEG image without a frame header (truncated or corrupt)");
}

Result<ImageHeader> Png(std::string_view b) {
  if (b.size() < 24) return Truncated("PNG");
  if (b.substr(12, 4) != "IHDR") return InvalidArgument("PNG image without an IHDR chunk first");
  return ImageHeader{ImageFormat::kPng, Be32(b, 16), Be32(b, 20)};
}

Result<ImageHeader> Bmp(std::string_view b) {
  if (b.size() < 26) return Truncated("BMP");
  if (Le32(b, 14) == 12) return ImageHeader{ImageFormat::kBmp, Le16(b, 18), Le16(b, 20)};
  const int32_t w = static_cast<int32_t>(Le32(b, 18)), h = static_cast<int32_t>(Le32(b, 22));
  // A negative height is a top-down bitmap.
  return ImageHeader{ImageFormat::kBmp, w, h == INT32_MIN ? 0 : std::abs(int64_t{h})};
}

Result<ImageHeader> Webp(std::string_view b) {
  if (b.size() < 30) return Truncated("WebP");
  const std::string_view chunk = b.substr(12, 4);
  if (chunk == "VP8 ") {
    if (Le24(b, 23) != 0x2A019D) return InvalidArgument("WebP image with a corrupt VP8 frame");
    return ImageHeader{ImageFormat::kWebp, Le16(b, 26) & 0x3FFF, Le16(b, 28) & 0x3FFF};
  }
  if (chunk == "VP8L") {
    if (static_cast<uint8_t>(b[20]) != 0x2F) {
      return InvalidArgument("WebP image with a corrupt VP8L header");
    }
    const uint32_t bits = Le32(b, 21);
    return ImageHeader{ImageFormat::kWebp, (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1};
  }
  if (chunk == "VP8X") {
    return ImageHeader{ImageFormat::kWebp, int64_t{Le24(b, 24)} + 1, int64_t{Le24(b, 27)} + 1};
  }
  return InvalidArgument("WebP image with an unknown first chunk");
}

}  // namespace

std::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kBmp:
      return "BMP";
    case ImageFormat::kWebp:
      return "WebP";
  }
  return "image";
}

Result<ImageHeader> ReadImageHeader(std::string_view b) {
  Result<ImageHeader> header = InvalidArgument("");
  if (b.size() >= 3 && b.substr(0, 3) == "\xFF\xD8\xFF") {
    header = Jpeg(b);
  } else if (b.size() >= 8 && b.substr(0, 8) == "\x89PNG\r\n\x1A\n") {
    header = Png(b);
  } else if (b.size() >= 2 && b.substr(0, 2) == "BM") {
    header = Bmp(b);
  } else if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") {
    header = Webp(b);
  } else {
    // The base64 text of one (JSON data without content_type): say what the bytes need.
    const bool base64 = b.starts_with("/9j/") || b.starts_with("iVBORw0KGgo") ||
                        b.starts_with("UklGR") || b.starts_with("Qk");
    return InvalidArgument("not a JPEG, PNG, BMP or WebP image (" + std::to_string(b.size()) +
                           " bytes)" +
                           (base64 ? std::string("; it reads as base64 text of one: JSON data "
                                                 "sends it with parameters.content_type "
                                                 "\"base64\"")
                                   : std::string()));
  }
  // OpenCV picks its decoder by its own signature scan, and its DICOM reader (GDCM) claims any
  // buffer with "DICM" at byte 128 before the WebP reader looks: a 148-byte "WebP" made it
  // allocate 1.9 GiB (found by image_fuzzer). Such a file is not one of the four formats.
  if (header.ok() && b.size() >= 132 && b.substr(128, 4) == "DICM") {
    return InvalidArgument(std::string(ImageFormatName(header->format)) +
                           " image that also carries a DICOM signature");
  }
  if (header.ok() && (header->width <= 0 || header->height <= 0)) {
    return InvalidArgument(std::string(ImageFormatName(header->format)) + " image of size " +
                           std::to_string(header->width) + "x" + std::to_string(header->height));
  }
  return header;
}

}  // namespace mmserve
