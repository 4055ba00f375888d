// ImagePostprocessor: a network's outputs in, what a client wants out — class scores
// (softmax/sigmoid, top-k with labels) or detections (YOLOv5/YOLOv8 layouts decoded, score
// threshold, OpenCV's NMSBoxes, boxes mapped back to the original image's pixels). Fixed at load
// against the network's outputs. Thread-safe: Run() is const.
//
//   classify, top_k 0:  the network output, activated, under its own name
//   classify, top_k K:  SCORES FP32 [n, K], CLASSES INT64 [n, K], LABELS BYTES [n, K]
//   detect:             BOXES FP32 [d, 4] (x1, y1, x2, y2), SCORES FP32 [d], CLASSES INT64 [d],
//                       IMAGE_INDEX INT64 [d] (which of the request's images), LABELS BYTES
//                       [d]: every image's detections, best first within each image
// LABELS only with a labels file.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/vision/image_preprocess.h"
#include "config/vision_config.h"

namespace mmserve {

class ImagePostprocessor {
 public:
  static Result<ImagePostprocessor> Create(const PostprocessConfig& config,
                                           const std::vector<TensorSpec>& network_outputs);

  const std::vector<TensorSpec>& outputs() const { return outputs_; }
  bool detects() const { return config_.kind == PostprocessConfig::Kind::kDetect; }

  // Replaces the network's outputs in `response` (one request: one row per image, `transforms`
  // in the same order) by the post-processed ones.
  Status Run(InferResponse& response, std::span<const ImageTransform> transforms) const;

 private:
  ImagePostprocessor() = default;
  Status Classify(const Tensor& scores, InferResponse& out) const;
  struct Detections {
    std::vector<float> boxes, scores;
    std::vector<int64_t> classes, images;
    std::string labels;
  };
  Status Detect(const Tensor& raw, std::span<const ImageTransform> transforms,
                InferResponse& out) const;
  // One image's detections (`v`: its row of the network output of shape `s`), added to `out`.
  Status DetectImage(std::span<const float> v, const Shape& s, const ImageTransform& transform,
                     int64_t image, Detections& out) const;
  std::string Label(int64_t class_id) const;

  PostprocessConfig config_;
  std::string source_;  // the network output read
  std::vector<TensorSpec> outputs_;
  std::vector<std::string> labels_;
};

}  // namespace mmserve
