#include "backend/vision/image_preprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/float16.h"
#include "testing/test_util.h"
#include "testing/vision_reference.h"
#include "vision_images.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using Resize = PreprocessConfig::Resize;
using nlohmann::json;

constexpr double kTolerance = 1e-4;  // FP32, as the issue asks

struct Case {
  std::string name;
  PreprocessConfig config;
  TensorSpec input;
  json reference;  // the same steps, for tests/testing/vision_reference.py
};

class ImagePreprocessTest : public ::testing::Test {
 protected:
  ImagePreprocessTest() {
    jpeg_ = dir_.Write("photo.jpg", testing::Encode(testing::TestPicture(97, 61), ".jpg"));
    png_ = dir_.Write("photo.png", testing::Encode(testing::TestPicture(97, 61), ".png"));
  }

  // Runs each case through mmserve and through the Python reference, and compares.
  void ExpectMatchesReference(std::vector<Case> cases) {
    json all = json::array();
    std::vector<std::vector<float>> ours;
    for (size_t i = 0; i < cases.size(); ++i) {
      Case& c = cases[i];
      auto pre = ImagePreprocessor::Create(c.config, c.input);
      ASSERT_TRUE(pre.ok()) << c.name << ": " << pre.status().ToString();
      const std::string image = testing::ReadFile(c.reference.value("image", jpeg_.string()));
      std::string row(pre->row_bytes(), '\0');
      auto t = pre->Run(image, row.data());
      ASSERT_TRUE(t.ok()) << c.name << ": " << t.status().ToString();
      std::vector<float> values;
      if (pre->type() == DataType::kFp16) {
        for (size_t k = 0; k < row.size() / 2; ++k) {
          uint16_t h;
          std::memcpy(&h, row.data() + 2 * k, 2);
          values.push_back(HalfToFloat(h));
        }
      } else {
        values.resize(row.size() / sizeof(float));
        std::memcpy(values.data(), row.data(), row.size());
      }
      ours.push_back(std::move(values));
      c.reference["kind"] = "preprocess";
      if (!c.reference.contains("image")) c.reference["image"] = jpeg_.string();
      c.reference["out"] = (dir_.path() / ("ref" + std::to_string(i))).string();
      all.push_back(c.reference);
    }
    ASSERT_TRUE(testing::RunVisionReference(dir_, all));
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto reference = testing::ReadRaw<float>(all[i]["out"].get<std::string>());
      ASSERT_EQ(ours[i].size(), reference.size()) << cases[i].name;
      const double tolerance = cases[i].config.datatype == DataType::kFp16 ? 2e-3 : kTolerance;
      double worst = 0;
      for (size_t k = 0; k < reference.size(); ++k) {
        worst = std::max(worst, std::abs(double{ours[i][k]} - reference[k]) /
                                    std::max(1.0, std::abs(double{reference[k]})));
      }
      EXPECT_LE(worst, tolerance) << cases[i].name;
    }
  }

  testing::TempDir dir_;
  std::filesystem::path jpeg_, png_;
};

PreprocessConfig Exact(int w, int h) {
  PreprocessConfig c;
  c.resize = Resize::kExact;
  c.width = w;
  c.height = h;
  return c;
}

TEST_F(ImagePreprocessTest, EveryStepMatchesOpenCvsPythonBindings) {
  const TensorSpec nchw32{"images", DataType::kFp32, {-1, 3, 32, 32}};
  std::vector<Case> cases;
  {  // resize exact, RGB, /255: what blobFromImage does without crop
    PreprocessConfig c = Exact(0, 0);  // sizes from the network
    c.scale = 1.0 / 255;
    cases.push_back({"exact",
                     c,
                     nchw32,
                     {{"resize", "exact"}, {"width", 32}, {"height", 32}, {"scale", 1.0 / 255}}});
    cases.push_back({"exact = blobFromImage",
                     c,
                     nchw32,
                     {{"blob", true}, {"width", 32}, {"height", 32}, {"scale", 1.0 / 255}}});
  }
  {  // the template's resize_40_center_crop with ImageNet's mean and std, in pixel units
    PreprocessConfig c;
    c.resize = Resize::kShortSide;
    c.short_side = 40;
    c.crop = true;
    c.mean = {123.675, 116.28, 103.53};
    c.std = {58.395, 57.12, 57.375};
    cases.push_back({"short side + crop + mean/std",
                     c,
                     nchw32,
                     {{"resize", "short_side"},
                      {"short_side", 40},
                      {"crop", {32, 32}},
                      {"mean", c.mean},
                      {"std", c.std}}});
  }
  {  // short side to the network's size and a centre crop = blobFromImage(crop=True)
    PreprocessConfig c;
    c.resize = Resize::kShortSide;
    c.short_side = 32;
    c.crop = true;
    c.mean = {100, 110, 120};
    c.scale = 0.5;
    cases.push_back({"short side = blobFromImage crop",
                     c,
                     nchw32,
                     {{"blob", true},
                      {"width", 32},
                      {"height", 32},
                      {"crop", {32, 32}},
                      {"mean", c.mean},
                      {"scale", 0.5}}});
  }
  {  // letterbox into 64x48, NHWC, BGR, cubic
    PreprocessConfig c;
    c.resize = Resize::kLetterbox;
    c.color = PreprocessConfig::Color::kBgr;
    c.interpolation = "cubic";
    c.scale = 1.0 / 255;
    cases.push_back({"letterbox nhwc bgr",
                     c,
                     {"x", DataType::kFp32, {-1, 48, 64, 3}},
                     {{"resize", "letterbox"},
                      {"width", 64},
                      {"height", 48},
                      {"color", "bgr"},
                      {"interpolation", "cubic"},
                      {"scale", 1.0 / 255},
                      {"layout", "nhwc"}}});
  }
  {  // grey, nearest, on the PNG
    PreprocessConfig c = Exact(16, 16);
    c.color = PreprocessConfig::Color::kGray;
    c.interpolation = "nearest";
    c.mean = {127.5};
    c.std = {127.5};
    cases.push_back({"gray",
                     c,
                     {"x", DataType::kFp32, {-1, 1, 16, 16}},
                     {{"image", png_.string()},
                      {"resize", "exact"},
                      {"width", 16},
                      {"height", 16},
                      {"color", "gray"},
                      {"interpolation", "nearest"},
                      {"mean", {127.5}},
                      {"std", {127.5}}}});
  }
  {  // no resize: the image already has the network's size
    PreprocessConfig c;
    cases.push_back({"none",
                     c,
                     {"x", DataType::kFp32, {-1, 3, 61, 97}},
                     {{"image", png_.string()}, {"resize", "none"}}});
  }
  {  // FP16 output
    PreprocessConfig c = Exact(0, 0);
    c.scale = 1.0 / 255;
    c.datatype = DataType::kFp16;
    cases.push_back({"fp16",
                     c,
                     {"images", DataType::kFp16, {-1, 3, 32, 32}},
                     {{"resize", "exact"}, {"width", 32}, {"height", 32}, {"scale", 1.0 / 255}}});
  }
  ExpectMatchesReference(std::move(cases));
}

TEST_F(ImagePreprocessTest, BadImagesAreRefusedWithTheReason) {
  auto pre = ImagePreprocessor::Create(Exact(0, 0), {"images", DataType::kFp32, {-1, 3, 32, 32}});
  ASSERT_TRUE(pre.ok());
  std::string row(pre->row_bytes(), '\0');
  const std::string jpeg = testing::ReadFile(jpeg_);
  const auto error = [&](std::string_view bytes) {
    auto t = pre->Run(bytes, row.data());
    return t.ok() ? std::string("accepted") : std::string(t.status().message());
  };
  EXPECT_THAT(error("not an image"), HasSubstr("not a JPEG, PNG, BMP or WebP image"));
  EXPECT_THAT(error(jpeg.substr(0, jpeg.size() / 3)), HasSubstr("JPEG image that is truncated"));
  const std::string png = testing::ReadFile(png_);
  EXPECT_THAT(error(png.substr(0, png.size() / 2)), HasSubstr("could not be decoded"));
  EXPECT_THAT(error(testing::PngClaiming(10000, 10000)),
              HasSubstr("10000x10000 pixels, over the limit of 40000000"));
  EXPECT_THAT(error(testing::PngClaiming(0, 5)), HasSubstr("size 0x5"));
  EXPECT_EQ(error(jpeg), "accepted");
}

TEST_F(ImagePreprocessTest, StepsThatCannotFitTheNetworkAreRefusedAtLoad) {
  const auto error = [](const PreprocessConfig& c, const TensorSpec& input) {
    auto p = ImagePreprocessor::Create(c, input);
    return p.ok() ? std::string("accepted") : std::string(p.status().message());
  };
  const TensorSpec nchw{"images", DataType::kFp32, {-1, 3, 32, 32}};
  EXPECT_THAT(error(Exact(0, 0), {"x", DataType::kFp32, {-1, 32, 32}}),
              HasSubstr("[batch, C, H, W] or [batch, H, W, C]"));
  EXPECT_THAT(error(Exact(64, 64), nchw), HasSubstr("makes 64x64 images"));
  EXPECT_THAT(error(Exact(0, 0), {"x", DataType::kFp32, {-1, 3, -1, -1}}),
              HasSubstr("variable height or width"));
  EXPECT_EQ(error(Exact(40, 30), {"x", DataType::kFp32, {-1, 3, -1, -1}}), "accepted");
  PreprocessConfig gray = Exact(0, 0);
  gray.color = PreprocessConfig::Color::kGray;
  EXPECT_THAT(error(gray, nchw), HasSubstr("has 3 channels"));
  PreprocessConfig short_side;
  short_side.resize = Resize::kShortSide;
  short_side.short_side = 256;
  EXPECT_THAT(error(short_side, nchw), HasSubstr("add a crop"));
  short_side.crop = true;
  short_side.short_side = 16;
  EXPECT_THAT(error(short_side, nchw), HasSubstr("less than its crop 32x32"));
  PreprocessConfig typed = Exact(0, 0);
  typed.datatype = DataType::kUint8;
  EXPECT_THAT(error(typed, nchw), HasSubstr("takes FP32"));
  EXPECT_THAT(error(Exact(0, 0), {"x", DataType::kInt64, {-1, 3, 32, 32}}),
              HasSubstr("FP32, FP16, UINT8 or INT8"));
}

}  // namespace
}  // namespace mmserve
