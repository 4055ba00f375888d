#include "backend/vision/image_preprocess.h"

#include <cmath>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "backend/vision/image_header.h"
#include "backend/vision/jpeg_decode.h"

namespace mmserve {
namespace {

using Resize = PreprocessConfig::Resize;

int CvType(DataType type) {
  switch (type) {
    case DataType::kFp16:
      return CV_16F;
    case DataType::kUint8:
      return CV_8U;
    case DataType::kInt8:
      return CV_8S;
    default:
      return CV_32F;
  }
}

int Interpolation(const std::string& name) {
  if (name == "nearest") return cv::INTER_NEAREST;
  if (name == "cubic") return cv::INTER_CUBIC;
  if (name == "area") return cv::INTER_AREA;
  return cv::INTER_LINEAR;
}

std::string Size(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

// A size the image steps fix at load: the config's value, else the network's; 0 when neither.
int Pick(int configured, int64_t network) {
  return configured > 0 ? configured : network > 0 ? static_cast<int>(network) : 0;
}

int Rounded(double v) { return std::max(1, static_cast<int>(std::lround(v))); }

// The resize's own size where the config leaves it to the network (`width` x `height`, what
// the last step makes), into `resolved`; an error when the steps cannot make that size.
Status ResolveSizes(const PreprocessConfig& config, int width, int height,
                    PreprocessConfig& resolved) {
  const bool sized = config.resize == Resize::kExact || config.resize == Resize::kLetterbox;
  if (sized && config.crop) {
    resolved.width = Pick(config.width, width);
    resolved.height = Pick(config.height, height);
    if (resolved.width < width || resolved.height < height) {
      return InvalidArgument("preprocess resizes to " + Size(resolved.width, resolved.height) +
                             ", smaller than its crop " + Size(width, height));
    }
  } else if (sized) {
    resolved.width = width;
    resolved.height = height;
  }
  if (config.resize == Resize::kShortSide) {
    if (!config.crop) {
      return InvalidArgument(
          "preprocess resizes the short side only, which leaves the other "
          "free: add a crop to reach " +
          Size(width, height));
    }
    if (config.short_side < std::max(width, height)) {
      return InvalidArgument("preprocess resizes the short side to " +
                             std::to_string(config.short_side) + ", less than its crop " +
                             Size(width, height));
    }
  }
  return Status::Ok();
}

// `img` resized as `c` says; `t` learns the scale and offset.
cv::Mat Resized(const cv::Mat& img, const PreprocessConfig& c, int interpolation,
                ImageTransform& t) {
  cv::Mat sized;
  switch (c.resize) {
    case Resize::kNone:
      sized = img;
      break;
    case Resize::kExact:
      cv::resize(img, sized, cv::Size(c.width, c.height), 0, 0, interpolation);
      break;
    case Resize::kShortSide: {
      // By factor, as cv::dnn::blobFromImage's crop does: the short side becomes short_side.
      const double f = static_cast<double>(c.short_side) / std::min(img.cols, img.rows);
      cv::resize(img, sized, cv::Size(), f, f, interpolation);
      t.scale_x = t.scale_y = f;
      break;
    }
    case Resize::kLetterbox: {
      const double r = std::min(static_cast<double>(c.width) / img.cols,
                                static_cast<double>(c.height) / img.rows);
      const int w = std::min(c.width, Rounded(img.cols * r));
      const int h = std::min(c.height, Rounded(img.rows * r));
      cv::Mat inner;
      cv::resize(img, inner, cv::Size(w, h), 0, 0, interpolation);
      const int left = (c.width - w) / 2, top = (c.height - h) / 2;
      cv::copyMakeBorder(inner, sized, top, c.height - h - top, left, c.width - w - left,
                         cv::BORDER_CONSTANT, cv::Scalar::all(c.pad));
      t.offset_x = left;
      t.offset_y = top;
      t.scale_x = static_cast<double>(w) / img.cols;
      t.scale_y = static_cast<double>(h) / img.rows;
      t.gain = r;
      // Python's round (ties to even), as Ultralytics writes it.
      t.gain_offset_x = std::nearbyint((c.width - img.cols * r) / 2 - 0.1);
      t.gain_offset_y = std::nearbyint((c.height - img.rows * r) / 2 - 0.1);
      break;
    }
  }
  if (c.resize == Resize::kNone || c.resize == Resize::kExact) {
    t.scale_x = static_cast<double>(sized.cols) / img.cols;
    t.scale_y = static_cast<double>(sized.rows) / img.rows;
  }
  return sized;
}

// Writes `sized` into `dst` as one row: value = pixel x alpha[c] + beta[c], in `type` and
// layout NCHW (planes) or NHWC (interleaved).
void WriteRow(const cv::Mat& sized, char* dst, DataType type, bool nchw, int channels,
              const double* alpha, const double* beta) {
  const int cv_type = CvType(type);
  const size_t plane = static_cast<size_t>(sized.cols) * sized.rows * DataTypeSize(type);
  if (nchw || channels == 1) {
    std::vector<cv::Mat> planes;
    cv::split(sized, planes);
    for (int c = 0; c < channels; ++c) {
      cv::Mat out(sized.rows, sized.cols, cv_type, dst + (nchw ? plane * c : 0));
      planes[static_cast<size_t>(c)].convertTo(out, cv_type, alpha[c], beta[c]);
    }
  } else {
    cv::Mat f;
    sized.convertTo(f, CV_32F);
    cv::multiply(f, cv::Scalar(alpha[0], alpha[1], alpha[2]), f);
    cv::add(f, cv::Scalar(beta[0], beta[1], beta[2]), f);
    cv::Mat out(sized.rows, sized.cols, CV_MAKETYPE(cv_type, channels), dst);
    f.convertTo(out, cv_type);
  }
}

}  // namespace

Result<ImagePreprocessor> ImagePreprocessor::Create(const PreprocessConfig& config,
                                                    const TensorSpec& input) {
  ImagePreprocessor p;
  p.config_ = config;
  const std::string name = "network input '" + input.name + "'";
  p.type_ = config.datatype.value_or(input.type);
  if (p.type_ != input.type) {
    return InvalidArgument("preprocess.datatype is " + std::string(DataTypeName(p.type_)) + ", " +
                           name + " takes " + std::string(DataTypeName(input.type)));
  }
  if (p.type_ != DataType::kFp32 && p.type_ != DataType::kFp16 && p.type_ != DataType::kUint8 &&
      p.type_ != DataType::kInt8) {
    return InvalidArgument(name + " is " + std::string(DataTypeName(input.type)) +
                           ": images become FP32, FP16, UINT8 or INT8 tensors");
  }
  const Shape& s = input.shape;
  if (s.size() != 4) {
    return InvalidArgument(name + " has shape " + ShapeToString(s) +
                           ": an image input is [batch, C, H, W] or [batch, H, W, C]");
  }
  const auto is_channels = [](int64_t d) { return d == 1 || d == 3; };
  switch (config.layout) {
    case PreprocessConfig::Layout::kNchw:
      p.nchw_ = true;
      break;
    case PreprocessConfig::Layout::kNhwc:
      p.nchw_ = false;
      break;
    case PreprocessConfig::Layout::kAuto:
      p.nchw_ = is_channels(s[1]) || !is_channels(s[3]);
      break;
  }
  const int64_t c = p.nchw_ ? s[1] : s[3], h = p.nchw_ ? s[2] : s[1], w = p.nchw_ ? s[3] : s[2];
  p.channels_ = config.color == PreprocessConfig::Color::kGray ? 1 : 3;
  if (c > 0 && c != p.channels_) {
    return InvalidArgument(name + " has " + std::to_string(c) + " channels (" +
                           (p.nchw_ ? "NCHW" : "NHWC") + ", shape " + ShapeToString(s) +
                           "); preprocess.color makes " + std::to_string(p.channels_));
  }
  // The network's height and width, else what the config's last sizing step makes.
  const bool sized = config.resize == Resize::kExact || config.resize == Resize::kLetterbox;
  p.width_ = Pick(config.crop ? config.crop_width : sized ? config.width : 0, w);
  p.height_ = Pick(config.crop ? config.crop_height : sized ? config.height : 0, h);
  if (p.width_ == 0 || p.height_ == 0) {
    return InvalidArgument(name + " has a variable height or width (" + ShapeToString(s) +
                           "): give preprocess a size (resize: {width, height}, or crop: "
                           "{width, height})");
  }
  if ((w > 0 && w != p.width_) || (h > 0 && h != p.height_)) {
    return InvalidArgument("preprocess makes " + Size(p.width_, p.height_) + " images, " + name +
                           " takes " + Size(w, h));
  }
  MMS_RETURN_IF_ERROR(ResolveSizes(config, p.width_, p.height_, p.config_));
  p.row_shape_ = Shape(s.begin() + 1, s.end());
  (p.nchw_ ? p.row_shape_[0] : p.row_shape_[2]) = p.channels_;
  (p.nchw_ ? p.row_shape_[1] : p.row_shape_[0]) = p.height_;
  (p.nchw_ ? p.row_shape_[2] : p.row_shape_[1]) = p.width_;
  p.row_bytes_ = static_cast<size_t>(p.width_) * static_cast<size_t>(p.height_) *
                 static_cast<size_t>(p.channels_) * DataTypeSize(p.type_);
  p.interpolation_ = Interpolation(config.interpolation);
  for (int i = 0; i < p.channels_; ++i) {
    const auto at = [i](const std::vector<double>& v, double fallback) {
      return v.empty() ? fallback : v.size() == 1 ? v[0] : v[static_cast<size_t>(i)];
    };
    const double mean = at(config.mean, 0), std = at(config.std, 1);
    p.alpha_[i] = config.scale / std;
    p.beta_[i] = -mean * config.scale / std;
  }
  return p;
}

Result<ImageHeader> ImagePreprocessor::Admit(std::string_view encoded) const {
  MMS_ASSIGN_OR_RETURN(ImageHeader header, ReadImageHeader(encoded));
  if (header.width > config_.max_pixels / header.height) {
    return InvalidArgument(std::string(ImageFormatName(header.format)) + " image of " +
                           Size(header.width, header.height) + " pixels, over the limit of " +
                           std::to_string(config_.max_pixels) + " (preprocess.max_pixels)");
  }
  return header;
}

Result<ImageTransform> ImagePreprocessor::Run(std::string_view encoded, char* dst) const {
  MMS_ASSIGN_OR_RETURN(ImageHeader header, Admit(encoded));
  return Run(encoded, header, dst);
}

Result<ImageTransform> ImagePreprocessor::Run(std::string_view encoded, const ImageHeader& header,
                                              char* dst, Clock::time_point deadline) const {
  ImageTransform t;
  try {
    cv::Mat img;
    if (header.format == ImageFormat::kJpeg) {
      MMS_ASSIGN_OR_RETURN(img, DecodeJpeg(encoded, channels_ == 1, deadline));
    } else {
      const cv::Mat raw(1, static_cast<int>(encoded.size()), CV_8U,
                        const_cast<char*>(encoded.data()));
      img = cv::imdecode(raw, channels_ == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
    }
    if (img.empty()) {
      return InvalidArgument(std::string(ImageFormatName(header.format)) +
                             " image that could not be decoded (truncated or corrupt)");
    }
    t.width = img.cols;
    t.height = img.rows;
    t.net_width = width_;
    t.net_height = height_;
    cv::Mat sized = Resized(img, config_, interpolation_, t);
    if (config_.crop) {
      const int x = (sized.cols - width_) / 2, y = (sized.rows - height_) / 2;
      if (x < 0 || y < 0) {
        return InvalidArgument("image of " + Size(sized.cols, sized.rows) +
                               " pixels (after resizing), smaller than the crop " +
                               Size(width_, height_));
      }
      sized = sized(cv::Rect(x, y, width_, height_));
      t.offset_x -= x;
      t.offset_y -= y;
      t.gain_offset_x -= x;
      t.gain_offset_y -= y;
    }
    if (sized.cols != width_ || sized.rows != height_) {
      return InvalidArgument("image of " + Size(sized.cols, sized.rows) +
                             " pixels; the network takes " + Size(width_, height_) +
                             " (preprocess has no resize)");
    }
    if (channels_ == 3 && config_.color == PreprocessConfig::Color::kRgb) {
      cv::cvtColor(sized, sized, cv::COLOR_BGR2RGB);
    }
    WriteRow(sized, dst, type_, nchw_, channels_, alpha_, beta_);
  } catch (const cv::Exception& e) {
    return InvalidArgument("image OpenCV could not process: " + e.err);
  }
  return t;
}

}  // namespace mmserve
