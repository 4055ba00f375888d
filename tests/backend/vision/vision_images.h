// Test images for the image stages: deterministic pictures encoded by OpenCV, and headers
// patched to claim what a hostile client would.
#pragma once

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

namespace mmserve::testing {

// A `width` x `height` BGR picture: gradients, a disc and a few stripes, so that resizing and
// colour order both show.
inline cv::Mat TestPicture(int width, int height) {
  cv::Mat img(height, width, CV_8UC3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      img.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<uint8_t>(x * 255 / width), static_cast<uint8_t>(y * 255 / height),
                    static_cast<uint8_t>((x * 7 + y * 13) % 256));
    }
  }
  cv::circle(img, {width / 3, height / 2}, std::min(width, height) / 4, {20, 200, 90}, -1);
  for (int x = 0; x < width; x += 9) cv::line(img, {x, 0}, {x, height - 1}, {255, 255, 255});
  return img;
}

// `img` encoded as `ext` (".jpg", ".png", ".bmp", ".webp").
inline std::string Encode(const cv::Mat& img, const std::string& ext) {
  std::vector<uint8_t> bytes;
  cv::imencode(ext, img, bytes);
  return std::string(bytes.begin(), bytes.end());
}

// A PNG that claims `width` x `height` in its header (its pixels are a 4x4 picture's).
inline std::string PngClaiming(uint32_t width, uint32_t height) {
  std::string png = Encode(TestPicture(4, 4), ".png");
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = static_cast<char>(width >> (24 - 8 * i));
    png[20 + i] = static_cast<char>(height >> (24 - 8 * i));
  }
  return png;
}

}  // namespace mmserve::testing
