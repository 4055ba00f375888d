#include "backend/vision/image_postprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor Floats(const std::string& name, Shape shape, const std::vector<float>& v) {
  return Tensor(name, DataType::kFp32, std::move(shape),
                std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> out(t.size_bytes() / sizeof(T));
  std::memcpy(out.data(), t.data().data(), t.size_bytes());
  return out;
}

const Tensor& Output(const InferResponse& r, const std::string& name) {
  for (const auto& t : r.outputs) {
    if (t.name() == name) return t;
  }
  static const Tensor kNone;
  ADD_FAILURE() << "no output " << name;
  return kNone;
}

TEST(ImagePostprocessTest, SoftmaxAndTopKWithLabels) {
  testing::TempDir dir;
  PostprocessConfig c;
  c.activation = PostprocessConfig::Activation::kSoftmax;
  c.top_k = 2;
  c.labels = dir.Write("labels.txt", "cat\r\ndog\nbird\n");
  auto post = ImagePostprocessor::Create(c, {{"logits", DataType::kFp32, {-1, 3}}});
  ASSERT_TRUE(post.ok()) << post.status().ToString();
  ASSERT_EQ(post->outputs().size(), 3u);
  EXPECT_EQ(post->outputs()[2].name, "LABELS");
  InferResponse r;
  r.outputs.push_back(Floats("logits", {2, 3}, {1, 3, 2, 0, 0, 5}));
  const ImageTransform t[2];
  ASSERT_TRUE(post->Run(r, t).ok());
  const auto scores = Values<float>(Output(r, "SCORES"));
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(scores[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(scores[1], std::exp(2.0) / z, 1e-6);
  EXPECT_THAT(Values<int64_t>(Output(r, "CLASSES")), ElementsAre(1, 2, 2, 0));
  EXPECT_EQ(Output(r, "CLASSES").shape(), (Shape{2, 2}));
  std::vector<std::string> labels;
  for (auto l : Output(r, "LABELS").BytesElements()) labels.emplace_back(l);
  EXPECT_THAT(labels, ElementsAre("dog", "bird", "bird", "cat"));  // ties: the lower class first
}

// Three boxes of class 0 (two overlapping), one of class 1 on top of the first: YOLOv5 rows of
// cx, cy, w, h, objectness, class 0, class 1.
const std::vector<float> kYolo = {
    50, 50, 20, 20, 0.9f, 0.9f, 0.1f,   // class 0, score 0.81
    52, 50, 20, 20, 0.9f, 0.8f, 0.1f,   // class 0, 0.72: suppressed by the first
    10, 10, 8,  8,  0.5f, 0.6f, 0.1f,   // class 0, 0.30
    50, 51, 20, 20, 0.9f, 0.1f, 0.7f,   // class 1, 0.63: kept only when NMS is class-aware
    90, 90, 10, 10, 0.1f, 0.9f, 0.1f};  // 0.09: under the threshold

TEST(ImagePostprocessTest, DetectionDecodesThresholdsSuppressesAndMapsBack) {
  PostprocessConfig c;
  c.kind = PostprocessConfig::Kind::kDetect;
  c.format = PostprocessConfig::Format::kYoloV5;  // auto would read 5 boxes < 7 values as v8's
  c.score_threshold = 0.25;
  c.iou_threshold = 0.45;
  auto post = ImagePostprocessor::Create(c, {{"output0", DataType::kFp32, {-1, 5, 7}}});
  ASSERT_TRUE(post.ok()) << post.status().ToString();
  // The network saw the image letterboxed: scale 0.5, 10 pixels of padding on top.
  ImageTransform t{
      .scale_x = 0.5, .scale_y = 0.5, .offset_x = 0, .offset_y = 10, .width = 200, .height = 180};
  InferResponse r;
  r.outputs.push_back(Floats("output0", {1, 5, 7}, kYolo));
  ASSERT_TRUE(post->Run(r, std::span(&t, 1)).ok());
  EXPECT_THAT(Values<int64_t>(Output(r, "CLASSES")), ElementsAre(0, 1, 0));
  const auto scores = Values<float>(Output(r, "SCORES"));
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_NEAR(scores[0], 0.81, 1e-6);
  EXPECT_NEAR(scores[1], 0.63, 1e-6);
  const auto boxes = Values<float>(Output(r, "BOXES"));
  EXPECT_THAT(std::vector<float>(boxes.begin(), boxes.begin() + 4),
              ElementsAre(80, 60, 120, 100));  // (40, 40, 60, 60) back through the letterbox
  EXPECT_EQ(Output(r, "BOXES").shape(), (Shape{3, 4}));

  // Across classes, the class-1 box falls to the class-0 one; max_detections keeps the best.
  c.class_aware = false;
  c.max_detections = 1;
  post = ImagePostprocessor::Create(c, {{"output0", DataType::kFp32, {-1, 5, 7}}});
  InferResponse again;
  again.outputs.push_back(Floats("output0", {1, 5, 7}, kYolo));
  ASSERT_TRUE(post->Run(again, std::span(&t, 1)).ok());
  EXPECT_THAT(Values<int64_t>(Output(again, "CLASSES")), ElementsAre(0));
}

TEST(ImagePostprocessTest, EachImageOfARequestIsDetectedApartAndIndexed) {
  PostprocessConfig c;
  c.kind = PostprocessConfig::Kind::kDetect;
  c.format = PostprocessConfig::Format::kYoloV5;
  auto post = ImagePostprocessor::Create(c, {{"output0", DataType::kFp32, {-1, 5, 7}}});
  ASSERT_TRUE(post.ok());
  std::vector<float> two = kYolo;
  two.insert(two.end(), kYolo.begin(), kYolo.begin() + 7);  // the second image: one box
  two.resize(2 * kYolo.size(), 0.0f);
  InferResponse r;
  r.outputs.push_back(Floats("output0", {2, 5, 7}, two));
  const ImageTransform t[2];
  ASSERT_TRUE(post->Run(r, t).ok());
  EXPECT_THAT(Values<int64_t>(Output(r, "IMAGE_INDEX")), ElementsAre(0, 0, 0, 1));
  EXPECT_THAT(Values<int64_t>(Output(r, "CLASSES")), ElementsAre(0, 1, 0, 0));
}

TEST(ImagePostprocessTest, YoloV8sLayoutIsTheTransposeWithoutObjectness) {
  // The same first two boxes as [1, 4 + 2, 2]: attributes on axis 1.
  const std::vector<float> v8 = {50, 10, 50, 10, 20, 8, 20, 8, 0.81f, 0.3f, 0.1f, 0.1f};
  PostprocessConfig c;
  c.kind = PostprocessConfig::Kind::kDetect;
  c.format = PostprocessConfig::Format::kYoloV8;
  auto post = ImagePostprocessor::Create(c, {{"output0", DataType::kFp32, {-1, 6, 2}}});
  ASSERT_TRUE(post.ok());
  InferResponse r;
  r.outputs.push_back(Floats("output0", {1, 6, 2}, v8));
  const ImageTransform t;
  ASSERT_TRUE(post->Run(r, std::span(&t, 1)).ok());
  EXPECT_THAT(Values<int64_t>(Output(r, "CLASSES")), ElementsAre(0, 0));
  const auto boxes = Values<float>(Output(r, "BOXES"));
  EXPECT_THAT(std::vector<float>(boxes.begin(), boxes.begin() + 4), ElementsAre(40, 40, 60, 60));
}

TEST(ImagePostprocessTest, SsdPairsOfBoxesAndScoresWithABackgroundClass) {
  PostprocessConfig c;
  c.kind = PostprocessConfig::Kind::kDetect;
  c.format = PostprocessConfig::Format::kSsd;
  c.normalized = true;
  c.background = 0;
  c.score_threshold = 0.5;
  auto post = ImagePostprocessor::Create(
      c, {{"scores", DataType::kFp32, {-1, 3, 3}}, {"boxes", DataType::kFp32, {-1, 3, 4}}});
  ASSERT_TRUE(post.ok()) << post.status().ToString();  // found by shape, in either order
  // Normalized x1, y1, x2, y2 of a 100x50 network input; class 0 is the background.
  const std::vector<float> boxes = {0.1f, 0.2f,  0.5f, 0.6f, 0.1f, 0.2f,
                                    0.5f, 0.62f, 0.6f, 0.0f, 0.9f, 0.4f};
  const std::vector<float> scores = {0.1f,  0.9f, 0.0f,   // class 1
                                     0.0f,  0.8f, 0.1f,   // class 1, overlaps the first
                                     0.95f, 0.2f, 0.3f};  // background wins: no detection
  InferResponse r;
  r.outputs.push_back(Floats("boxes", {1, 3, 4}, boxes));
  r.outputs.push_back(Floats("scores", {1, 3, 3}, scores));
  ImageTransform t;
  t.net_width = 100;
  t.net_height = 50;
  ASSERT_TRUE(post->Run(r, std::span(&t, 1), /*detection_list=*/true).ok());
  EXPECT_THAT(Values<int64_t>(Output(r, "CLASSES")), ElementsAre(1));
  EXPECT_THAT(Values<float>(Output(r, "BOXES")),
              ::testing::Pointwise(::testing::FloatNear(1e-4), {10.0f, 10.0f, 50.0f, 30.0f}));
  const auto list = Output(r, "DETECTIONS").BytesElements();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_THAT(std::string(list[0]), HasSubstr(R"("class":1,"image":0,"score":0.89999997)"));
}

TEST(ImagePostprocessTest, WhatTheNetworkCannotFeedIsRefusedAtLoad) {
  PostprocessConfig c;
  c.kind = PostprocessConfig::Kind::kDetect;
  EXPECT_THAT(
      std::string(
          ImagePostprocessor::Create(c, {{"y", DataType::kFp32, {-1, 10}}}).status().message()),
      HasSubstr("detection reads [batch, boxes, 5+classes]"));
  c.output = "nope";
  EXPECT_THAT(
      std::string(
          ImagePostprocessor::Create(c, {{"y", DataType::kFp32, {-1, 3, 9}}}).status().message()),
      HasSubstr("'nope' is not a network output (y)"));
  PostprocessConfig ssd;
  ssd.kind = PostprocessConfig::Kind::kDetect;
  ssd.format = PostprocessConfig::Format::kSsd;
  EXPECT_THAT(
      std::string(
          ImagePostprocessor::Create(ssd, {{"y", DataType::kFp32, {-1, 3, 9}}}).status().message()),
      HasSubstr("name them with postprocess.boxes and postprocess.scores"));
  PostprocessConfig ints;
  EXPECT_THAT(
      std::string(
          ImagePostprocessor::Create(ints, {{"y", DataType::kInt64, {-1, 3}}}).status().message()),
      HasSubstr("reads FP32"));
}

}  // namespace
}  // namespace mmserve
