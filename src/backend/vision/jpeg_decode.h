// DecodeJpeg: a JPEG decoded with libjpeg-turbo directly, for the image pre-processing.
//
// OpenCV's reader goes on where libjpeg only warns: a file cut short (even with an end-of-image
// marker appended) decodes with grey for what is missing, and a 40-megapixel progressive file
// runs to its end whatever its request's deadline. Here every warning about corrupt data is an
// error, and the decode stops between rows (and between a progressive file's scans) once the
// deadline has passed. The EXIF orientation is applied, as OpenCV's imdecode does.
//
// Thread-safe: no state outside the call.
#pragma once

#include <opencv2/core.hpp>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace mmserve {

// `encoded` decoded into an 8-bit BGR image (CV_8UC3), or grey (CV_8UC1) when `grey`.
// InvalidArgument names what is wrong with the file; DeadlineExceeded when `deadline` passed.
Result<cv::Mat> DecodeJpeg(std::string_view encoded, bool grey,
                           Clock::time_point deadline = Clock::time_point::max());

}  // namespace mmserve
