#include "backend/vision/image_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vision_images.h"

namespace mmserve {
namespace {

using testing::Encode;
using ::testing::HasSubstr;
using testing::TestPicture;

TEST(ImageHeaderTest, ReadsTheSizeOfEveryFormatServed) {
  const cv::Mat img = TestPicture(97, 61);
  const std::pair<const char*, ImageFormat> formats[] = {{".jpg", ImageFormat::kJpeg},
                                                         {".png", ImageFormat::kPng},
                                                         {".bmp", ImageFormat::kBmp},
                                                         {".webp", ImageFormat::kWebp}};
  for (const auto& [ext, format] : formats) {
    auto header = ReadImageHeader(Encode(img, ext));
    ASSERT_TRUE(header.ok()) << ext << ": " << header.status().ToString();
    EXPECT_EQ(header->format, format) << ext;
    EXPECT_EQ(header->width, 97) << ext;
    EXPECT_EQ(header->height, 61) << ext;
  }
  // Lossless WebP has its own header (VP8L).
  std::vector<uint8_t> lossless;
  cv::imencode(".webp", img, lossless, {cv::IMWRITE_WEBP_QUALITY, 101});
  auto header = ReadImageHeader(std::string(lossless.begin(), lossless.end()));
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->width, 97);
  EXPECT_EQ(header->height, 61);
}

TEST(ImageHeaderTest, RefusesWhatIsNotAServedImageOrHasNoSize) {
  EXPECT_THAT(std::string(ReadImageHeader("GIF89a....").status().message()),
              HasSubstr("not a JPEG, PNG, BMP or WebP image"));
  EXPECT_FALSE(ReadImageHeader(Encode(TestPicture(8, 8), ".tiff")).ok());  // decodable, not served
  EXPECT_FALSE(ReadImageHeader("").ok());
  const std::string jpeg = Encode(TestPicture(97, 61), ".jpg");
  EXPECT_THAT(std::string(ReadImageHeader(jpeg.substr(0, 20)).status().message()),
              HasSubstr("JPEG"));
  EXPECT_THAT(std::string(ReadImageHeader(testing::PngClaiming(0, 10)).status().message()),
              HasSubstr("of size 0x10"));
  for (size_t n = 0; n < 64; ++n) (void)ReadImageHeader(jpeg.substr(0, n));  // never a crash
}

}  // namespace
}  // namespace mmserve
