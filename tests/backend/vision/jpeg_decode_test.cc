#include "backend/vision/jpeg_decode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <opencv2/imgcodecs.hpp>

#include <jpeglib.h>

#include "vision_images.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;

// What OpenCV's imdecode makes of `bytes`, the reference for every good file.
cv::Mat OpenCvDecode(const std::string& bytes, bool grey) {
  const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8U, const_cast<char*>(bytes.data()));
  return cv::imdecode(raw, grey ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
}

void ExpectSame(const cv::Mat& a, const cv::Mat& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.type(), b.type());
  EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0);
}

std::string Jpeg(const cv::Mat& img, bool progressive = false) {
  std::vector<uint8_t> bytes;
  cv::imencode(".jpg", img, bytes, {cv::IMWRITE_JPEG_PROGRESSIVE, progressive ? 1 : 0});
  return std::string(bytes.begin(), bytes.end());
}

// `jpeg` with an EXIF segment (big-endian TIFF, one IFD entry: Orientation) after its SOI.
std::string WithOrientation(const std::string& jpeg, int orientation) {
  std::string tiff("MM\0*\0\0\0\x08\0\x01", 10);
  tiff += std::string("\x01\x12\0\x03\0\0\0\x01\0", 9) + static_cast<char>(orientation) +
          std::string("\0\0\0\0\0\0", 6);
  const std::string payload = std::string("Exif\0\0", 6) + tiff;
  const size_t length = payload.size() + 2;
  std::string app1 = "\xFF\xE1";
  app1 += static_cast<char>(length >> 8);
  app1 += static_cast<char>(length & 0xFF);
  return jpeg.substr(0, 2) + app1 + payload + jpeg.substr(2);
}

// A CMYK JPEG (as Adobe's tools write it), encoded with libjpeg itself: OpenCV writes none.
std::string CmykJpeg(int width, int height) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = 4;
  c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(static_cast<size_t>(width) * 4);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &row[static_cast<size_t>(x) * 4];
      p[0] = static_cast<uint8_t>(x * 255 / width);
      p[1] = static_cast<uint8_t>(y * 255 / height);
      p[2] = 128;
      p[3] = static_cast<uint8_t>(255 - (x + y) % 64);
    }
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string bytes(reinterpret_cast<char*>(out), size);
  std::free(out);
  return bytes;
}

TEST(JpegDecodeTest, GoodFilesDecodeAsOpenCvDecodesThem) {
  const cv::Mat picture = testing::TestPicture(97, 61);
  for (bool progressive : {false, true}) {
    const std::string jpeg = Jpeg(picture, progressive);
    for (bool grey : {false, true}) {
      SCOPED_TRACE(std::string(progressive ? "progressive" : "baseline") + (grey ? " grey" : ""));
      auto decoded = DecodeJpeg(jpeg, grey);
      ASSERT_TRUE(decoded.ok()) << decoded.status().message();
      ExpectSame(*decoded, OpenCvDecode(jpeg, grey));
    }
  }
  // A grey file, in colour.
  cv::Mat grey_picture;
  cv::cvtColor(picture, grey_picture, cv::COLOR_BGR2GRAY);
  const std::string grey_jpeg = Jpeg(grey_picture);
  auto decoded = DecodeJpeg(grey_jpeg, false);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ExpectSame(*decoded, OpenCvDecode(grey_jpeg, false));
}

TEST(JpegDecodeTest, CmykFilesBecomeBgrWithinOneLevelOfOpenCv) {
  const std::string jpeg = CmykJpeg(40, 24);
  for (bool grey : {false, true}) {
    auto decoded = DecodeJpeg(jpeg, grey);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    const cv::Mat reference = OpenCvDecode(jpeg, grey);
    ASSERT_EQ(decoded->size(), reference.size());
    ASSERT_EQ(decoded->type(), reference.type());
    EXPECT_LE(cv::norm(*decoded, reference, cv::NORM_INF), 2) << "grey " << grey;
  }
}

TEST(JpegDecodeTest, TheExifOrientationIsAppliedAsOpenCvAppliesIt) {
  const std::string jpeg = Jpeg(testing::TestPicture(48, 32));
  for (int orientation = 1; orientation <= 8; ++orientation) {
    SCOPED_TRACE(orientation);
    const std::string oriented = WithOrientation(jpeg, orientation);
    auto decoded = DecodeJpeg(oriented, false);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_EQ(decoded->cols, orientation >= 5 ? 32 : 48);
    ExpectSame(*decoded, OpenCvDecode(oriented, false));
  }
}

// Round 2, F10: cut short and given an end-of-image marker, a file passed the header check and
// libjpeg filled the missing rows with grey. Every such warning is an error now.
TEST(JpegDecodeTest, TruncatedOrCorruptDataIsAnErrorNotGrey) {
  const std::string jpeg = Jpeg(testing::TestPicture(200, 150));
  for (bool progressive : {false, true}) {
    const std::string file = progressive ? Jpeg(testing::TestPicture(200, 150), true) : jpeg;
    const std::string cut = file.substr(0, file.size() * 2 / 3) + "\xFF\xD9";
    auto decoded = DecodeJpeg(cut, false);
    ASSERT_FALSE(decoded.ok()) << (progressive ? "progressive" : "baseline");
    EXPECT_THAT(decoded.status().message(), HasSubstr("JPEG image that is truncated or corrupt"));
  }
  EXPECT_FALSE(DecodeJpeg(jpeg.substr(0, jpeg.size() / 2), false).ok());
  EXPECT_FALSE(DecodeJpeg("\xFF\xD8\xFF\xD9", false).ok());
}

TEST(JpegDecodeTest, TheDecodeStopsOnceTheDeadlineHasPassed) {
  const std::string jpeg = Jpeg(testing::TestPicture(64, 64), true);
  auto decoded = DecodeJpeg(jpeg, false, Clock::now() - std::chrono::milliseconds(1));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(DecodeJpeg(jpeg, false, Clock::now() + std::chrono::hours(1)).ok());
}

}  // namespace
}  // namespace mmserve
