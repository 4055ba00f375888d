// ImagePreprocessor: an encoded image in, one row of a network's input tensor out — decode,
// resize (exact, short side, letterbox), centre crop, colour order, (pixel - mean) / std x scale,
// layout (NCHW/NHWC) and datatype (FP32/FP16/UINT8/INT8), with OpenCV (imgcodecs, imgproc);
// JPEGs are decoded by jpeg_decode.h, strictly.
// Fixed at load against the network input it feeds: sizes the config leaves out come from that
// input's shape, and what cannot fit it is refused then, not per request.
//
// Thread-safe: Run() is const and keeps no state between calls.
#pragma once

#include <string_view>

#include "backend/backend.h"
#include "backend/vision/image_header.h"
#include "common/clock.h"
#include "config/vision_config.h"

namespace mmserve {

// Where a pixel of the network's input came from in the original image:
// original_x = (network_x - offset_x) / scale_x, and the same for y.
struct ImageTransform {
  double scale_x = 1, scale_y = 1, offset_x = 0, offset_y = 0;
  // The same as one gain for both axes (postprocess box_scale: single_gain, which validation
  // allows with a letterbox only): its ratio and its pad as Ultralytics' scale_boxes computes
  // them, less a crop's offset.
  double gain = 1, gain_offset_x = 0, gain_offset_y = 0;
  int64_t width = 0, height = 0;          // of the original image
  int64_t net_width = 0, net_height = 0;  // of the network input
};

class ImagePreprocessor {
 public:
  // `input` is the network input the images feed (its first dimension is the batch).
  static Result<ImagePreprocessor> Create(const PreprocessConfig& config, const TensorSpec& input);

  // The shape of one image's row (the network input's shape without the batch dimension), and
  // the datatype and bytes of that row.
  const Shape& row_shape() const { return row_shape_; }
  DataType type() const { return type_; }
  size_t row_bytes() const { return row_bytes_; }
  int width() const { return width_; }
  int height() const { return height_; }

  // The header of `encoded`, or InvalidArgument when it is no served image or has more than
  // max_pixels: cheap enough to check every image of a request before any row is allocated.
  Result<ImageHeader> Admit(std::string_view encoded) const;
  // Decodes `encoded` (whose header Admit() returned) and writes its row into `dst`
  // (row_bytes() bytes). An error says what is wrong with the image (InvalidArgument); the
  // caller names the input. A JPEG's decode stops once `deadline` has passed
  // (DeadlineExceeded).
  Result<ImageTransform> Run(std::string_view encoded, const ImageHeader& header, char* dst,
                             Clock::time_point deadline = Clock::time_point::max()) const;
  // Admit(), then Run().
  Result<ImageTransform> Run(std::string_view encoded, char* dst) const;

 private:
  ImagePreprocessor() = default;

  PreprocessConfig config_;
  Shape row_shape_;
  DataType type_ = DataType::kFp32;
  size_t row_bytes_ = 0;
  int width_ = 0, height_ = 0, channels_ = 3;
  bool nchw_ = true;
  int interpolation_ = 1;
  // value = pixel x alpha[c] + beta[c]: (pixel - mean) / std x scale, per channel.
  double alpha_[3] = {1, 1, 1}, beta_[3] = {0, 0, 0};
};

}  // namespace mmserve
