#include "config/vision_config.h"

#include <unistd.h>

#include "common/strings.h"
#include "config/config_readers.h"

namespace mmserve {
namespace {

constexpr int kMaxSide = 16384;  // pixels, for every size a stage names

// The compact forms, matched by hand: a cursor over the text (linear, no backtracking).
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool Lit(std::string_view word) {
    if (s_.substr(0, word.size()) != word) return false;
    s_.remove_prefix(word.size());
    return true;
  }
  // [1-9][0-9]* no greater than `max`.
  bool Positive(int* out, int max = kMaxSide) {
    size_t n = 0;
    int64_t v = 0;
    while (n < s_.size() && s_[n] >= '0' && s_[n] <= '9' && v <= max) v = v * 10 + (s_[n++] - '0');
    if (n == 0 || s_[0] == '0' || v > max) return false;
    s_.remove_prefix(n);
    *out = static_cast<int>(v);
    return true;
  }
  // 0.45, .45, 0, 1, 1.0: a fraction in [0, 1].
  bool Fraction(double* out) {
    size_t n = 0;
    while (n < s_.size() && ((s_[n] >= '0' && s_[n] <= '9') || s_[n] == '.') && n < 32) ++n;
    const std::string text(s_.substr(0, n));
    char* end = nullptr;
    const double v = n == 0 ? -1 : std::strtod(text.c_str(), &end);
    if (n == 0 || end != text.c_str() + text.size() || !(v >= 0 && v <= 1)) return false;
    s_.remove_prefix(n);
    *out = v;
    return true;
  }
  bool Done() const { return s_.empty(); }

 private:
  std::string_view s_;
};

constexpr const char* kPreprocessForms =
    "none, resize_<N>, resize_<W>x<H>, resize_<N>_center_crop[_<C>], letterbox_<N>, or a map "
    "of steps (resize, crop, color, scale, mean, std, layout, datatype; docs/VISION.md)";
constexpr const char* kPostprocessForms =
    "none, softmax, sigmoid, argmax, topk_<K>, nms_threshold_<0..1>, or a map (softmax, "
    "sigmoid, top_k, labels, detect, score_threshold, nms_threshold, class_aware, "
    "max_detections, and for detect: ssd boxes, scores, box_format, normalized, background; "
    "docs/VISION.md)";

std::optional<PreprocessConfig> CompactPreprocess(const std::string& text) {
  PreprocessConfig p;
  int a = 0, b = 0;
  if (Cursor c(text); c.Lit("letterbox_") && c.Positive(&a) && c.Done()) {
    p.resize = PreprocessConfig::Resize::kLetterbox;
    p.width = p.height = a;
    return p;
  }
  Cursor c(text);
  if (!c.Lit("resize_") || !c.Positive(&a)) return std::nullopt;
  if (c.Done()) {
    p.resize = PreprocessConfig::Resize::kExact;
    p.width = p.height = a;
    return p;
  }
  if (c.Lit("x")) {
    if (!c.Positive(&b) || !c.Done()) return std::nullopt;
    p.resize = PreprocessConfig::Resize::kExact;
    p.width = a;
    p.height = b;
    return p;
  }
  if (!c.Lit("_center_crop")) return std::nullopt;
  p.resize = PreprocessConfig::Resize::kShortSide;
  p.short_side = a;
  p.crop = true;
  if (c.Done()) return p;
  if (!c.Lit("_") || !c.Positive(&b) || !c.Done()) return std::nullopt;
  p.crop_width = p.crop_height = b;
  return p;
}

std::optional<PostprocessConfig> CompactPostprocess(const std::string& text) {
  PostprocessConfig p;
  int k = 0;
  double iou = 0;
  if (text == "softmax") {
    p.activation = PostprocessConfig::Activation::kSoftmax;
  } else if (text == "sigmoid") {
    p.activation = PostprocessConfig::Activation::kSigmoid;
  } else if (text == "argmax") {
    p.top_k = 1;
  } else if (Cursor c(text); c.Lit("topk_") && c.Positive(&k, 100000) && c.Done()) {
    p.top_k = k;
  } else if (Cursor d(text); d.Lit("nms_threshold_") && d.Fraction(&iou) && d.Done()) {
    p.kind = PostprocessConfig::Kind::kDetect;
    p.iou_threshold = iou;
  } else {
    return std::nullopt;
  }
  return p;
}

void ReadResize(ParamReader& r, PreprocessConfig& p) {
  const nlohmann::json* v = r.Raw("resize");
  if (!v) return;
  if (v->is_string()) {
    const std::string mode = v->get<std::string>();
    if (mode == "exact") {
      p.resize = PreprocessConfig::Resize::kExact;
    } else if (mode == "letterbox") {
      p.resize = PreprocessConfig::Resize::kLetterbox;
    } else {
      r.Error("resize", "exact, letterbox or a map {width, height, letterbox} / {short_side}",
              DescribeFound(*v));
    }
    return;
  }
  auto map = r.Map("resize");
  if (!map) return;
  ParamReader m(*map, r.errors());
  p.width = static_cast<int>(m.Int("width", 0, 1, kMaxSide));
  p.height = static_cast<int>(m.Int("height", 0, 1, kMaxSide));
  p.short_side = static_cast<int>(m.Int("short_side", 0, 1, kMaxSide));
  const bool letterbox = m.Bool("letterbox", false);
  if (m.Has("short_side") && (m.Has("width") || m.Has("height") || letterbox)) {
    m.Error("short_side", "short_side alone (the other side follows the aspect ratio)",
            "short_side with width, height or letterbox");
  }
  p.resize = m.Has("short_side") ? PreprocessConfig::Resize::kShortSide
             : letterbox         ? PreprocessConfig::Resize::kLetterbox
                                 : PreprocessConfig::Resize::kExact;
  m.Finish();
}

void ReadCrop(ParamReader& r, PreprocessConfig& p) {
  const nlohmann::json* v = r.Raw("crop");
  if (!v) return;
  if (v->is_string() && v->get<std::string>() == "center") {
    p.crop = true;
    return;
  }
  if (v->is_string() && v->get<std::string>() == "none") return;
  auto map = r.Map("crop");
  if (!map) {
    r.Error("crop", "center, none or a map {width, height} (a centre crop of that size)",
            DescribeFound(*v));
    return;
  }
  ParamReader m(*map, r.errors());
  p.crop = true;
  p.crop_width = static_cast<int>(m.Int("width", 0, 1, kMaxSide));
  p.crop_height = static_cast<int>(m.Int("height", 0, 1, kMaxSide));
  m.Finish();
}

PreprocessConfig MapPreprocess(ParamReader& r) {
  PreprocessConfig p;
  p.input = r.String("input", "");
  ReadResize(r, p);
  p.interpolation =
      r.String("interpolation", p.interpolation, {"nearest", "linear", "cubic", "area"});
  p.pad = r.Double("pad", p.pad, 0, 255);
  ReadCrop(r, p);
  const std::string color = r.String("color", "rgb", {"rgb", "bgr", "gray"});
  p.color = color == "bgr"    ? PreprocessConfig::Color::kBgr
            : color == "gray" ? PreprocessConfig::Color::kGray
                              : PreprocessConfig::Color::kRgb;
  p.scale = r.Double("scale", p.scale, -1e6, 1e6);
  p.mean = r.DoubleList("mean", -1e6, 1e6);
  p.std = r.DoubleList("std", 1e-12, 1e6);
  const size_t channels = p.color == PreprocessConfig::Color::kGray ? 1 : 3;
  for (const char* key : {"mean", "std"}) {
    const auto& values = std::string(key) == "mean" ? p.mean : p.std;
    if (values.size() > 1 && values.size() != channels) {
      r.Error(key, "1 or " + std::to_string(channels) + " values (one per channel)",
              std::to_string(values.size()) + " values");
    }
  }
  const std::string layout = r.String("layout", "auto", {"auto", "nchw", "nhwc"});
  p.layout = layout == "nchw"   ? PreprocessConfig::Layout::kNchw
             : layout == "nhwc" ? PreprocessConfig::Layout::kNhwc
                                : PreprocessConfig::Layout::kAuto;
  if (r.Has("datatype")) {
    p.datatype = ParseDataType(r.String("datatype", "FP32", {"FP32", "FP16", "UINT8", "INT8"}));
  }
  p.max_pixels = r.Int("max_pixels", p.max_pixels, 1, int64_t{1} << 30);
  return p;
}

PostprocessConfig MapPostprocess(ParamReader& r, const std::filesystem::path& base_dir) {
  PostprocessConfig p;
  p.output = r.String("output", "");
  if (r.Has("detect")) {
    p.kind = PostprocessConfig::Kind::kDetect;
    const std::string format = r.String("detect", "auto", {"auto", "yolov5", "yolov8", "ssd"});
    p.format = format == "yolov5"   ? PostprocessConfig::Format::kYoloV5
               : format == "yolov8" ? PostprocessConfig::Format::kYoloV8
               : format == "ssd"    ? PostprocessConfig::Format::kSsd
                                    : PostprocessConfig::Format::kAuto;
    if (p.format == PostprocessConfig::Format::kSsd) {
      p.boxes_output = r.String("boxes", "");
      p.scores_output = r.String("scores", "");
      p.box_format = r.String("box_format", "xyxy", {"xyxy", "cxcywh"}) == "cxcywh"
                         ? PostprocessConfig::BoxFormat::kCxcywh
                         : PostprocessConfig::BoxFormat::kXyxy;
      p.normalized = r.Bool("normalized", false);
      p.background = static_cast<int>(r.Int("background", -1, -1, 100000));
    }
    p.score_threshold = r.Double("score_threshold", p.score_threshold, 0, 1);
    p.iou_threshold = r.Double("nms_threshold", p.iou_threshold, 0, 1);
    p.class_aware = r.Bool("class_aware", p.class_aware);
    p.max_detections = static_cast<int>(r.Int("max_detections", p.max_detections, 1, 100000));
    p.box_scale = r.String("box_scale", "per_axis", {"per_axis", "single_gain"}) == "single_gain"
                      ? PostprocessConfig::BoxScale::kSingleGain
                      : PostprocessConfig::BoxScale::kPerAxis;
  } else {
    const bool softmax = r.Bool("softmax", false), sigmoid = r.Bool("sigmoid", false);
    if (softmax && sigmoid) r.Error("sigmoid", "softmax or sigmoid, not both", "both true");
    p.activation = softmax   ? PostprocessConfig::Activation::kSoftmax
                   : sigmoid ? PostprocessConfig::Activation::kSigmoid
                             : PostprocessConfig::Activation::kNone;
    p.top_k = static_cast<int>(r.Int("top_k", 0, 1, 100000));
  }
  const std::string labels = r.String("labels", "");
  if (!labels.empty()) {
    p.labels = AbsoluteIn(base_dir, labels);
    if (::access(p.labels.c_str(), R_OK) != 0) {
      r.Error("labels", "a readable file of labels, one per line", "'" + p.labels.string() + "'");
    }
  }
  return p;
}

}  // namespace

std::optional<PreprocessConfig> ReadPreprocess(ParamReader& r) {
  const nlohmann::json* v = r.Raw("preprocess");
  if (!v || (v->is_string() && v->get<std::string>() == "none")) return std::nullopt;
  if (v->is_string()) {
    if (auto p = CompactPreprocess(v->get<std::string>())) return p;
  } else if (auto map = r.Map("preprocess")) {
    ParamReader m(*map, r.errors());
    PreprocessConfig p = MapPreprocess(m);
    m.Finish();
    return p;
  }
  if (!v->is_object()) r.Error("preprocess", kPreprocessForms, DescribeFound(*v));
  return std::nullopt;
}

std::optional<PostprocessConfig> ReadPostprocess(ParamReader& r,
                                                 const std::filesystem::path& base_dir) {
  const nlohmann::json* v = r.Raw("postprocess");
  if (!v || (v->is_string() && v->get<std::string>() == "none")) return std::nullopt;
  if (v->is_string()) {
    if (auto p = CompactPostprocess(v->get<std::string>())) return p;
  } else if (auto map = r.Map("postprocess")) {
    ParamReader m(*map, r.errors());
    PostprocessConfig p = MapPostprocess(m, base_dir);
    m.Finish();
    return p;
  }
  if (!v->is_object()) r.Error("postprocess", kPostprocessForms, DescribeFound(*v));
  return std::nullopt;
}

void CheckStages(ParamReader& r, const std::optional<PreprocessConfig>& pre,
                 const std::optional<PostprocessConfig>& post) {
  if (post && post->box_scale == PostprocessConfig::BoxScale::kSingleGain &&
      (!pre || pre->resize != PreprocessConfig::Resize::kLetterbox)) {
    r.Error("postprocess.box_scale", "per_axis unless preprocess resizes by letterbox (a single "
            "gain maps back a letterbox only)", "single_gain");
  }
}

}  // namespace mmserve
