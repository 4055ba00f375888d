#include "config/vision_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/backend_registry.h"
#include "backend/identity/identity_backend.h"
#include "config/config_parser.h"
#include "runtime/host_runtime.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using Resize = PreprocessConfig::Resize;

class VisionConfigTest : public ::testing::Test {
 protected:
  VisionConfigTest() { backends_.Register(std::make_unique<IdentityBackend>(host_)); }

  // The model entry `stages` (YAML lines under an identity model) parsed.
  Result<ServerConfig> Parse(const std::string& stages) {
    const std::string yaml = "models:\n  - name: m\n    backend: identity\n" + stages;
    return ParseConfig(yaml, dir_.Write("m.yaml", yaml).string(), backends_);
  }
  ModelConfig Model(const std::string& stages) {
    auto config = Parse(stages);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() ? config->models[0] : ModelConfig{};
  }
  std::string Error(const std::string& stages) {
    auto config = Parse(stages);
    return config.ok() ? "accepted" : std::string(config.status().message());
  }

  HostRuntime host_;
  BackendRegistry backends_;
  testing::TempDir dir_;
};

TEST_F(VisionConfigTest, TheTemplatesCompactStrings) {
  auto p = Model("    preprocess: resize_256_center_crop_224\n").preprocess;
  ASSERT_TRUE(p);
  EXPECT_EQ(p->resize, Resize::kShortSide);
  EXPECT_EQ(p->short_side, 256);
  EXPECT_TRUE(p->crop);
  EXPECT_EQ(p->crop_width, 224);
  p = Model("    preprocess: resize_640x480\n").preprocess;
  EXPECT_EQ(p->resize, Resize::kExact);
  EXPECT_EQ(p->width, 640);
  EXPECT_EQ(p->height, 480);
  EXPECT_EQ(Model("    preprocess: letterbox_640\n").preprocess->resize, Resize::kLetterbox);
  EXPECT_FALSE(Model("    preprocess: none\n").preprocess);
  auto q = Model("    postprocess: nms_threshold_.5\n").postprocess;
  ASSERT_TRUE(q);
  EXPECT_EQ(q->kind, PostprocessConfig::Kind::kDetect);
  EXPECT_DOUBLE_EQ(q->iou_threshold, 0.5);
  EXPECT_EQ(Model("    postprocess: topk_5\n").postprocess->top_k, 5);
  EXPECT_EQ(Model("    postprocess: argmax\n").postprocess->top_k, 1);
  EXPECT_EQ(Model("    postprocess: softmax\n").postprocess->activation,
            PostprocessConfig::Activation::kSoftmax);
}

TEST_F(VisionConfigTest, TheMapFormNamesEachStep) {
  dir_.Write("coco.txt", "person\n");
  const ModelConfig m = Model(
      "    preprocess: {resize: {width: 640, height: 480, letterbox: true}, color: bgr,\n"
      "                 mean: [0.5], std: [0.25], scale: 2, layout: nhwc, datatype: FP16,\n"
      "                 interpolation: area, pad: 0, max_pixels: 1000000}\n"
      "    postprocess: {detect: ssd, boxes: b, scores: s, box_format: cxcywh, normalized: true,\n"
      "                  background: 0, score_threshold: 0.4, nms_threshold: 0.6,\n"
      "                  class_aware: false, max_detections: 7, labels: coco.txt}\n");
  ASSERT_TRUE(m.preprocess && m.postprocess);
  const PreprocessConfig& p = *m.preprocess;
  EXPECT_EQ(p.resize, Resize::kLetterbox);
  EXPECT_EQ(p.color, PreprocessConfig::Color::kBgr);
  EXPECT_EQ(p.layout, PreprocessConfig::Layout::kNhwc);
  EXPECT_EQ(p.datatype, DataType::kFp16);
  EXPECT_EQ(p.interpolation, "area");
  EXPECT_EQ(p.max_pixels, 1000000);
  const PostprocessConfig& q = *m.postprocess;
  EXPECT_EQ(q.format, PostprocessConfig::Format::kSsd);
  EXPECT_EQ(q.boxes_output, "b");
  EXPECT_EQ(q.box_format, PostprocessConfig::BoxFormat::kCxcywh);
  EXPECT_EQ(q.background, 0);
  EXPECT_EQ(q.max_detections, 7);
  EXPECT_FALSE(q.class_aware);
  EXPECT_EQ(q.labels, dir_.path() / "coco.txt");
}

TEST_F(VisionConfigTest, MistakesNameTheField) {
  EXPECT_THAT(Error("    preprocess: resize_0\n"),
              HasSubstr("models[0].preprocess: expected none, resize_<N>"));
  EXPECT_THAT(Error("    preprocess: resize_99999999999999999999\n"),
              HasSubstr("models[0].preprocess"));
  EXPECT_THAT(Error("    preprocess: {resize: {short_side: 256, width: 3}}\n"),
              HasSubstr("models[0].preprocess.resize.short_side: expected short_side alone"));
  EXPECT_THAT(Error("    preprocess: {mean: [1, 2]}\n"),
              HasSubstr("models[0].preprocess.mean: expected 1 or 3 values (one per channel)"));
  EXPECT_THAT(Error("    preprocess: {std: [0]}\n"), HasSubstr("models[0].preprocess.std[0]"));
  EXPECT_THAT(Error("    preprocess: {colour: rgb}\n"), HasSubstr("did you mean 'color'"));
  EXPECT_THAT(Error("    postprocess: nms_threshold_1.5\n"),
              HasSubstr("models[0].postprocess: expected none, softmax"));
  EXPECT_THAT(Error("    postprocess: {softmax: true, sigmoid: true}\n"),
              HasSubstr("softmax or sigmoid, not both"));
  EXPECT_THAT(Error("    postprocess: {top_k: 3, labels: missing.txt}\n"),
              HasSubstr("models[0].postprocess.labels: expected a readable file of labels"));
  EXPECT_THAT(Error("    preprocess: {resize: {width: 64, height: 64}}\n"
                    "    postprocess: {detect: yolov5, box_scale: single_gain}\n"),
              HasSubstr("models[0].postprocess.box_scale: expected per_axis unless preprocess "
                        "resizes by letterbox"));
  EXPECT_THAT(Error("    postprocess: {detect: yolov5, box_scale: one}\n"),
              HasSubstr("models[0].postprocess.box_scale"));
  EXPECT_EQ(Model("    preprocess: {resize: {letterbox: true, width: 64, height: 64}}\n"
                  "    postprocess: {detect: yolov5, box_scale: single_gain}\n")
                .postprocess->box_scale,
            PostprocessConfig::BoxScale::kSingleGain);
}

}  // namespace
}  // namespace mmserve
