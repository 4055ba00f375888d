#include "backend/vision/image_postprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <opencv2/dnn.hpp>

#include "common/files.h"
#include "common/json.h"

namespace mmserve {
namespace {

using Kind = PostprocessConfig::Kind;
using Format = PostprocessConfig::Format;

constexpr int64_t kMaxLabelsBytes = 16 << 20;

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> out(t.size_bytes() / sizeof(float));
  std::memcpy(out.data(), t.data().data(), out.size() * sizeof(float));
  return out;
}

template <typename T>
Tensor Make(const std::string& name, DataType type, Shape shape, const std::vector<T>& values) {
  return Tensor(
      name, type, std::move(shape),
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

void Activate(PostprocessConfig::Activation activation, std::span<float> row) {
  if (activation == PostprocessConfig::Activation::kSigmoid) {
    for (float& v : row) v = 1.0f / (1.0f + std::exp(-v));
  } else if (activation == PostprocessConfig::Activation::kSoftmax && !row.empty()) {
    const float max = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (float& v : row) sum += (v = std::exp(v - max));
    for (float& v : row) v = static_cast<float>(v / sum);
  }
}

}  // namespace

Result<ImagePostprocessor> ImagePostprocessor::Create(
    const PostprocessConfig& config, const std::vector<TensorSpec>& network_outputs) {
  ImagePostprocessor p;
  p.config_ = config;
  const TensorSpec* source = nullptr;
  for (const auto& o : network_outputs) {
    if (config.output.empty() || o.name == config.output) {
      source = &o;
      break;
    }
  }
  if (!source) {
    std::string names;
    for (const auto& o : network_outputs) names += (names.empty() ? "" : ", ") + o.name;
    return InvalidArgument("postprocess.output '" + config.output + "' is not a network output (" +
                           names + ")");
  }
  p.source_ = source->name;
  if (source->type != DataType::kFp32) {
    return InvalidArgument("network output '" + source->name + "' is " +
                           std::string(DataTypeName(source->type)) +
                           ": post-processing reads FP32");
  }
  if (config.kind == Kind::kDetect && config.format == Format::kSsd) {
    MMS_RETURN_IF_ERROR(p.FindSsdOutputs(network_outputs));
  } else if (config.kind == Kind::kDetect && source->shape.size() != 3) {
    return InvalidArgument("network output '" + source->name + "' has shape " +
                           ShapeToString(source->shape) +
                           ": detection reads [batch, boxes, 5+classes] (YOLOv5) or [batch, "
                           "4+classes, boxes] (YOLOv8)");
  }
  if (!config.labels.empty()) {
    MMS_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(config.labels, kMaxLabelsBytes));
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(at, end - at);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      p.labels_.push_back(std::move(line));
      at = end + 1;
    }
  }
  const bool labels = !p.labels_.empty();
  if (config.kind == Kind::kDetect) {
    p.outputs_ = {{"BOXES", DataType::kFp32, {-1, 4}},
                  {"SCORES", DataType::kFp32, {-1}},
                  {"CLASSES", DataType::kInt64, {-1}},
                  {"IMAGE_INDEX", DataType::kInt64, {-1}}};
    if (labels) p.outputs_.push_back({"LABELS", DataType::kBytes, {-1}});
    p.outputs_.push_back({"DETECTIONS", DataType::kBytes, {1}});  // on request
  } else if (config.top_k > 0) {
    const int64_t k = config.top_k;
    p.outputs_ = {{"SCORES", DataType::kFp32, {-1, k}}, {"CLASSES", DataType::kInt64, {-1, k}}};
    if (labels) p.outputs_.push_back({"LABELS", DataType::kBytes, {-1, k}});
  } else {
    p.outputs_ = {*source};
  }
  return p;
}

Status ImagePostprocessor::FindSsdOutputs(const std::vector<TensorSpec>& outputs) {
  const auto named = [&](const std::string& name, bool boxes) -> const TensorSpec* {
    for (const auto& o : outputs) {
      const bool shaped = o.shape.size() == 3 && (o.shape[2] == 4) == boxes;
      if (name.empty() ? shaped : o.name == name) return &o;
    }
    return nullptr;
  };
  const TensorSpec* boxes = named(config_.boxes_output, true);
  const TensorSpec* scores = named(config_.scores_output, false);
  if (!boxes || !scores || boxes == scores) {
    return InvalidArgument(
        "postprocess detect: ssd reads two network outputs, boxes [batch, boxes, 4] and scores "
        "[batch, boxes, classes]: name them with postprocess.boxes and postprocess.scores");
  }
  for (const TensorSpec* o : {boxes, scores}) {
    if (o->type != DataType::kFp32 || o->shape.size() != 3) {
      return InvalidArgument("network output '" + o->name + "' is " +
                             std::string(DataTypeName(o->type)) + " " + ShapeToString(o->shape) +
                             ": detect: ssd reads FP32 [batch, boxes, 4 or classes]");
    }
  }
  source_ = boxes->name;
  ssd_scores_ = scores->name;
  return Status::Ok();
}

std::string ImagePostprocessor::Label(int64_t class_id) const {
  return class_id >= 0 && static_cast<size_t>(class_id) < labels_.size()
             ? labels_[static_cast<size_t>(class_id)]
             : std::to_string(class_id);
}

Status ImagePostprocessor::Run(InferResponse& response, std::span<const ImageTransform> transforms,
                               bool detection_list) const {
  const auto find = [&](const std::string& name) -> Result<const Tensor*> {
    for (const auto& t : response.outputs) {
      if (t.name() == name && t.type() == DataType::kFp32 && !t.shape().empty() &&
          t.shape()[0] == static_cast<int64_t>(transforms.size())) {
        return &t;
      }
    }
    return Internal("the network's output '" + name + "' is missing or not FP32 [" +
                    std::to_string(transforms.size()) + ", ...] for " +
                    std::to_string(transforms.size()) + " images");
  };
  MMS_ASSIGN_OR_RETURN(const Tensor* source, find(source_));
  const Tensor* scores = nullptr;
  if (!ssd_scores_.empty()) {
    MMS_ASSIGN_OR_RETURN(scores, find(ssd_scores_));
  }
  InferResponse out;
  const Status status =
      detects() ? Detect(*source, scores, transforms, detection_list, out) : Classify(*source, out);
  if (!status.ok()) return status;
  response.outputs = std::move(out.outputs);
  return Status::Ok();
}

Status ImagePostprocessor::Classify(const Tensor& scores, InferResponse& out) const {
  const int64_t rows = scores.shape()[0];
  std::vector<float> values = Floats(scores);
  const size_t width = rows > 0 ? values.size() / static_cast<size_t>(rows) : 0;
  for (int64_t r = 0; r < rows; ++r) {
    Activate(config_.activation, std::span<float>(values).subspan(r * width, width));
  }
  if (config_.top_k == 0) {
    out.outputs.push_back(Make(scores.name(), DataType::kFp32, scores.shape(), values));
    return Status::Ok();
  }
  const size_t k = std::min<size_t>(static_cast<size_t>(config_.top_k), width);
  std::vector<float> top_scores;
  std::vector<int64_t> top_classes;
  std::string labels;
  std::vector<size_t> order(width);
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(order.begin(), order.end(), 0);
    const float* row = values.data() + r * width;
    // Highest score first; the lower class first among equal scores.
    std::partial_sort(
        order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
        [row](size_t a, size_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (size_t i = 0; i < static_cast<size_t>(config_.top_k); ++i) {
      const bool real = i < k;  // a network with fewer classes than top_k pads with -1
      top_scores.push_back(real ? row[order[i]] : 0.0f);
      top_classes.push_back(real ? static_cast<int64_t>(order[i]) : -1);
      if (!labels_.empty()) Tensor::AppendBytesElement(labels, real ? Label(order[i]) : "");
    }
  }
  const Shape shape{rows, config_.top_k};
  out.outputs.push_back(Make("SCORES", DataType::kFp32, shape, top_scores));
  out.outputs.push_back(Make("CLASSES", DataType::kInt64, shape, top_classes));
  if (!labels_.empty()) out.outputs.emplace_back("LABELS", DataType::kBytes, shape, labels);
  return Status::Ok();
}

Status ImagePostprocessor::Detect(const Tensor& raw, const Tensor* ssd_scores,
                                  std::span<const ImageTransform> transforms, bool detection_list,
                                  InferResponse& out) const {
  const Shape& s = raw.shape();
  if (s.size() != 3) return Internal("detection output of shape " + ShapeToString(s));
  if (ssd_scores &&
      (ssd_scores->shape().size() != 3 || ssd_scores->shape()[1] != s[1] || s[2] != 4)) {
    return Internal("ssd outputs of shapes " + ShapeToString(s) + " and " +
                    ShapeToString(ssd_scores->shape()) + " do not pair boxes with scores");
  }
  const std::vector<float> v = Floats(raw);
  const std::vector<float> sv = ssd_scores ? Floats(*ssd_scores) : std::vector<float>{};
  const size_t per_image = static_cast<size_t>(s[1] * s[2]);
  const size_t scores_per_image = ssd_scores ? sv.size() / transforms.size() : 0;
  Detections all;
  for (size_t i = 0; i < transforms.size(); ++i) {
    Candidates c;
    const auto image = std::span<const float>(v).subspan(i * per_image, per_image);
    if (ssd_scores) {
      SsdCandidates(image,
                    std::span<const float>(sv).subspan(i * scores_per_image, scores_per_image),
                    s[1], ssd_scores->shape()[2], transforms[i], c);
    } else {
      MMS_RETURN_IF_ERROR(YoloCandidates(image, s, c));
    }
    Keep(c, transforms[i], static_cast<int64_t>(i), all);
  }
  const int64_t n = static_cast<int64_t>(all.scores.size());
  out.outputs.push_back(Make("BOXES", DataType::kFp32, {n, 4}, all.boxes));
  out.outputs.push_back(Make("SCORES", DataType::kFp32, {n}, all.scores));
  out.outputs.push_back(Make("CLASSES", DataType::kInt64, {n}, all.classes));
  out.outputs.push_back(Make("IMAGE_INDEX", DataType::kInt64, {n}, all.images));
  if (!labels_.empty()) out.outputs.emplace_back("LABELS", DataType::kBytes, Shape{n}, all.labels);
  if (detection_list) out.outputs.push_back(DetectionList(all));
  return Status::Ok();
}

void ImagePostprocessor::Candidates::Add(double x1, double y1, double w, double h, float score,
                                         int64_t id) {
  if (!std::isfinite(x1) || !std::isfinite(y1) || !(w >= 0) || !(h >= 0) || !std::isfinite(w) ||
      !std::isfinite(h)) {
    return;
  }
  rects.emplace_back(x1, y1, w, h);
  scores.push_back(score);
  ids.push_back(id);
  extent = std::max({extent, std::abs(x1) + w, std::abs(y1) + h});
}

Status ImagePostprocessor::YoloCandidates(std::span<const float> v, const Shape& s,
                                          Candidates& out) const {
  // YOLOv5: [boxes, 5 + C] with an objectness; YOLOv8: [4 + C, boxes] without.
  const bool v8 =
      config_.format == Format::kYoloV8 || (config_.format == Format::kAuto && s[1] < s[2]);
  const int64_t boxes = v8 ? s[2] : s[1], attributes = v8 ? s[1] : s[2];
  const int64_t classes = attributes - (v8 ? 4 : 5);
  if (classes < 1) {
    return Internal("detection output of shape " + ShapeToString(s) + " holds no class scores (" +
                    (v8 ? "YOLOv8" : "YOLOv5") + " layout)");
  }
  const auto at = [&](int64_t box, int64_t attribute) {
    return v[static_cast<size_t>(v8 ? attribute * boxes + box : box * attributes + attribute)];
  };
  const int64_t first = v8 ? 4 : 5;
  for (int64_t b = 0; b < boxes; ++b) {
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (at(b, first + c) > at(b, first + best)) best = c;
    }
    const float score = at(b, first + best) * (v8 ? 1.0f : at(b, 4));
    if (!(score >= config_.score_threshold)) continue;
    const double w = at(b, 2), h = at(b, 3);
    out.Add(at(b, 0) - w / 2, at(b, 1) - h / 2, w, h, score, best);
  }
  return Status::Ok();
}

void ImagePostprocessor::SsdCandidates(std::span<const float> boxes, std::span<const float> scores,
                                       int64_t count, int64_t classes, const ImageTransform& t,
                                       Candidates& out) const {
  // Normalized coordinates are fractions of the network input.
  const double sx = config_.normalized && t.net_width > 0 ? t.net_width : 1;
  const double sy = config_.normalized && t.net_height > 0 ? t.net_height : 1;
  for (int64_t b = 0; b < count; ++b) {
    int64_t best = -1;
    for (int64_t c = 0; c < classes; ++c) {
      if (c == config_.background) continue;
      if (best < 0 || scores[static_cast<size_t>(b * classes + c)] >
                          scores[static_cast<size_t>(b * classes + best)]) {
        best = c;
      }
    }
    if (best < 0) continue;
    const float score = scores[static_cast<size_t>(b * classes + best)];
    if (!(score >= config_.score_threshold)) continue;
    const float* box = boxes.data() + b * 4;
    if (config_.box_format == PostprocessConfig::BoxFormat::kCxcywh) {
      out.Add((box[0] - box[2] / 2) * sx, (box[1] - box[3] / 2) * sy, box[2] * sx, box[3] * sy,
              score, best);
    } else {
      out.Add(box[0] * sx, box[1] * sy, (box[2] - box[0]) * sx, (box[3] - box[1]) * sy, score,
              best);
    }
  }
}

void ImagePostprocessor::Keep(const Candidates& c, const ImageTransform& t, int64_t image,
                              Detections& out) const {
  // Class-aware NMS as one call: each class's boxes moved apart so that no two classes overlap.
  std::vector<cv::Rect2d> shifted = c.rects;
  if (config_.class_aware) {
    for (size_t i = 0; i < shifted.size(); ++i) {
      const double shift = static_cast<double>(c.ids[i]) * (2 * c.extent + 1);
      shifted[i].x += shift;
      shifted[i].y += shift;
    }
  }
  std::vector<int> keep;
  // NMSBoxes' own top_k bounds the candidates before suppression, not the detections after.
  cv::dnn::NMSBoxes(shifted, c.scores, static_cast<float>(config_.score_threshold),
                    static_cast<float>(config_.iou_threshold), keep);
  if (keep.size() > static_cast<size_t>(config_.max_detections)) {
    keep.resize(static_cast<size_t>(config_.max_detections));
  }
  // Into the original image's pixels, inside it (a limit of 0: no image, raw tensors).
  const auto back = [](double v, double offset, double scale, int64_t limit) {
    const double x = (v - offset) / scale;
    return static_cast<float>(limit > 0 ? std::clamp(x, 0.0, static_cast<double>(limit)) : x);
  };
  const bool single = config_.box_scale == PostprocessConfig::BoxScale::kSingleGain;
  const double ox = single ? t.gain_offset_x : t.offset_x;
  const double oy = single ? t.gain_offset_y : t.offset_y;
  const double sx = single ? t.gain : t.scale_x, sy = single ? t.gain : t.scale_y;
  for (int i : keep) {
    const cv::Rect2d& r = c.rects[static_cast<size_t>(i)];
    out.boxes.push_back(back(r.x, ox, sx, t.width));
    out.boxes.push_back(back(r.y, oy, sy, t.height));
    out.boxes.push_back(back(r.x + r.width, ox, sx, t.width));
    out.boxes.push_back(back(r.y + r.height, oy, sy, t.height));
    out.scores.push_back(c.scores[static_cast<size_t>(i)]);
    out.classes.push_back(c.ids[static_cast<size_t>(i)]);
    out.images.push_back(image);
    if (!labels_.empty()) Tensor::AppendBytesElement(out.labels, Label(out.classes.back()));
  }
}

Tensor ImagePostprocessor::DetectionList(const Detections& all) const {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < all.scores.size(); ++i) {
    nlohmann::json d = {
        {"image", all.images[i]},
        {"box",
         {all.boxes[4 * i], all.boxes[4 * i + 1], all.boxes[4 * i + 2], all.boxes[4 * i + 3]}},
        {"score", all.scores[i]},
        {"class", all.classes[i]}};
    if (!labels_.empty()) d["label"] = Label(all.classes[i]);
    list.push_back(std::move(d));
  }
  std::string data;
  Tensor::AppendBytesElement(data, DumpJson(list));
  return Tensor("DETECTIONS", DataType::kBytes, {1}, std::move(data));
}

}  // namespace mmserve
