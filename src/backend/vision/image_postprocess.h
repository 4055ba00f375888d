// ImagePostprocessor: a network's outputs in, what a client wants out — class scores
// (softmax/sigmoid, top-k with labels) or detections (YOLOv5/YOLOv8 layouts decoded, score
// threshold, OpenCV's NMSBoxes, boxes mapped back to the original image's pixels). Fixed at load
// against the network's outputs. Thread-safe: Run() is const.
//
//   classify, top_k 0:  the network output, activated, under its own name
//   classify, top_k K:  SCORES FP32 [n, K], CLASSES INT64 [n, K], LABELS BYTES [n, K]
//   detect:             BOXES FP32 [d, 4] (x1, y1, x2, y2), SCORES FP32 [d], CLASSES INT64 [d],
//                       IMAGE_INDEX INT64 [d] (which of the request's images), LABELS BYTES
//                       [d]: every image's detections, best first within each image; and on
//                       request DETECTIONS BYTES [1], the same as a JSON list
// Detection decodes YOLOv5 ([N, boxes, 5+C]), YOLOv8 ([N, 4+C, boxes]) and SSD-style pairs of
// outputs (boxes [N, boxes, 4] and scores [N, boxes, C]).
// LABELS only with a labels file.
#pragma once

#include <opencv2/core/types.hpp>
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
  // in the same order) by the post-processed ones; with `detection_list`, a detector adds
  // DETECTIONS, the same detections as one JSON list.
  Status Run(InferResponse& response, std::span<const ImageTransform> transforms,
             bool detection_list = false) const;

 private:
  struct Detections {
    std::vector<float> boxes, scores;
    std::vector<int64_t> classes, images;
    std::string labels;
  };
  // One image's boxes over the score threshold, before NMS, in the network input's pixels.
  struct Candidates {
    std::vector<cv::Rect2d> rects;
    std::vector<float> scores;
    std::vector<int64_t> ids;
    double extent = 0;  // the farthest coordinate, to move classes apart
    void Add(double x1, double y1, double w, double h, float score, int64_t id);
  };

  ImagePostprocessor() = default;
  Status FindSsdOutputs(const std::vector<TensorSpec>& outputs);
  Status Classify(const Tensor& scores, InferResponse& out) const;
  Status Detect(const Tensor& raw, const Tensor* ssd_scores,
                std::span<const ImageTransform> transforms, bool detection_list,
                InferResponse& out) const;
  Status YoloCandidates(std::span<const float> v, const Shape& s, Candidates& out) const;
  void SsdCandidates(std::span<const float> boxes, std::span<const float> scores, int64_t count,
                     int64_t classes, const ImageTransform& t, Candidates& out) const;
  // NMS over `c`, the best max_detections mapped back to the image, added to `out`.
  void Keep(const Candidates& c, const ImageTransform& t, int64_t image, Detections& out) const;
  Tensor DetectionList(const Detections& all) const;
  std::string Label(int64_t class_id) const;

  PostprocessConfig config_;
  std::string source_;      // the network output read (ssd: the boxes)
  std::string ssd_scores_;  // ssd: the scores output
  std::vector<TensorSpec> outputs_;
  std::vector<std::string> labels_;
};

}  // namespace mmserve
