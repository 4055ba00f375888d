// The image stages of a model: `preprocess:` (an encoded image in, the network's input tensor
// out) and `postprocess:` (the network's outputs in, scores, classes or detections out). Plain
// structs, read from the template's compact strings or from a map that names each step
// (docs/VISION.md); run by backend/vision/ on the model's worker threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "config/params.h"

namespace mmserve {

struct PreprocessConfig {
  enum class Resize {
    kNone,       // the image must already have the network's size
    kExact,      // to width x height, aspect ratio not kept
    kShortSide,  // the short side to `short_side`, aspect ratio kept
    kLetterbox,  // inside width x height, aspect ratio kept, the rest padded with `pad`
  };
  enum class Color { kRgb, kBgr, kGray };
  enum class Layout { kAuto, kNchw, kNhwc };  // auto: from the network input's shape

  std::string input;  // the network input the image feeds; "" = its only input
  Resize resize = Resize::kNone;
  int width = 0, height = 0;             // kExact/kLetterbox; 0 = the network input's
  int short_side = 0;                    // kShortSide
  std::string interpolation = "linear";  // nearest | linear | cubic | area
  double pad = 114;                      // kLetterbox's border value
  bool crop = false;                     // a centre crop after the resize
  int crop_width = 0, crop_height = 0;   // 0 = the network input's
  Color color = Color::kRgb;
  // value = (pixel - mean[c]) / std[c] x scale, in this order; mean and std have 0, 1 or one
  // entry per channel.
  double scale = 1.0;
  std::vector<double> mean, std;
  Layout layout = Layout::kAuto;
  std::optional<DataType> datatype;  // nullopt: the network input's
  int64_t max_pixels = 40'000'000;   // decoded width x height beyond this: 400
};

struct PostprocessConfig {
  enum class Kind { kClassify, kDetect };
  enum class Activation { kNone, kSoftmax, kSigmoid };
  enum class Format { kAuto, kYoloV5, kYoloV8, kSsd };
  enum class BoxFormat { kXyxy, kCxcywh };

  Kind kind = Kind::kClassify;
  std::string output;  // the network output it reads; "" = the first
  // kClassify: the activation over the last dimension, then the top_k classes (0: every score,
  // unranked).
  Activation activation = Activation::kNone;
  int top_k = 0;
  // kDetect. auto: attributes on the last axis ([N, boxes, 5+C]) are YOLOv5's layout (with an
  // objectness), attributes on axis 1 ([N, 4+C, boxes]) YOLOv8's (without).
  Format format = Format::kAuto;
  // kSsd: two outputs, boxes [N, boxes, 4] and scores [N, boxes, C] ("" = found by shape), in
  // box_format, normalized to [0, 1] of the network input or in its pixels; `background` is a
  // class that is never a detection (-1: none).
  std::string boxes_output, scores_output;
  BoxFormat box_format = BoxFormat::kXyxy;
  bool normalized = false;
  int background = -1;
  double score_threshold = 0.25;
  double iou_threshold = 0.45;  // the template's nms_threshold
  bool class_aware = true;      // NMS within each class (false: across classes)
  // How boxes go back to the original image's pixels after a letterbox: kPerAxis divides each
  // axis by its own resize scale (the rounded inner size over the image's), exact for the
  // pixels the network saw; kSingleGain divides both by the one ratio min(W/w, H/h) and takes
  // off the pad as YOLOv5/Ultralytics' scale_boxes computes it (up to ~3 px apart on an
  // 868x600 photo). kSingleGain needs preprocess resize: letterbox.
  enum class BoxScale { kPerAxis, kSingleGain };
  BoxScale box_scale = BoxScale::kPerAxis;
  int max_detections = 100;
  // One label per line, class 0 first: adds a LABELS output.
  std::filesystem::path labels;
};

// Reads `preprocess` / `postprocess` of a model entry: nullopt when absent or "none". Errors
// name the field; a labels file is resolved against `base_dir` and must be readable.
std::optional<PreprocessConfig> ReadPreprocess(ParamReader& r);
std::optional<PostprocessConfig> ReadPostprocess(ParamReader& r,
                                                 const std::filesystem::path& base_dir);
// What one stage asks of the other: box_scale: single_gain needs a letterbox. Errors go to `r`.
void CheckStages(ParamReader& r, const std::optional<PreprocessConfig>& pre,
                 const std::optional<PostprocessConfig>& post);

}  // namespace mmserve
