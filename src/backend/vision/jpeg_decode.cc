#include "backend/vision/jpeg_decode.h"

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <jerror.h>
#include <jpeglib.h>

namespace mmserve {
namespace {

// A progressive file may hold any number of scans, each a pass over every coefficient: a few
// KB of scans cost minutes. libjpeg-turbo's own tools suggest this bound for untrusted files.
constexpr int kMaxScans = 500;

// libjpeg reports an error by calling error_exit, which must not return: it jumps back to the
// decode's setjmp. Plain data only, so nothing is skipped that needs a destructor.
struct Guard {
  jpeg_error_mgr base;      // first: libjpeg sees a jpeg_error_mgr*
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  Clock::time_point deadline;
  bool deadline_passed;
  bool too_many_scans;
  char message[JMSG_LENGTH_MAX];
};

Guard& GuardOf(j_common_ptr cinfo) { return *reinterpret_cast<Guard*>(cinfo->err); }

[[noreturn]] void Stop(j_common_ptr cinfo) {
  Guard& guard = GuardOf(cinfo);
  if (guard.message[0] == '\0') guard.base.format_message(cinfo, guard.message);
  std::longjmp(guard.jump, 1);
}

// Warnings (level -1) that say the data is corrupt stop the decode; libjpeg would fill what
// they lose with grey. Those that lose nothing (padding before a marker, a bad ICC profile or
// an unknown JFIF revision, both unused) pass. Trace messages (level >= 0) are ignored.
void OnMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  switch (cinfo->err->msg_code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_BOGUS_ICC:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
      return;
    default:
      Stop(cinfo);
  }
}

void OnProgress(j_common_ptr cinfo) {
  Guard& guard = GuardOf(cinfo);
  if (Clock::now() >= guard.deadline) {
    guard.deadline_passed = true;
    Stop(cinfo);
  }
  if (cinfo->is_decompressor &&
      reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxScans) {
    guard.too_many_scans = true;
    Stop(cinfo);
  }
}

// The EXIF orientation (1..8) in an APP1 segment, else 1. Reads one IFD's entries, each at a
// bounded offset: linear in the segment's size.
int ExifOrientation(const jpeg_saved_marker_ptr markers) {
  for (auto m = markers; m; m = m->next) {
    const uint8_t* d = m->data;
    const size_t n = m->data_length;
    if (m->marker != JPEG_APP0 + 1 || n < 14 || std::memcmp(d, "Exif\0\0", 6) != 0) continue;
    const uint8_t* tiff = d + 6;
    const size_t size = n - 6;
    const bool le = tiff[0] == 'I' && tiff[1] == 'I';
    if (!le && !(tiff[0] == 'M' && tiff[1] == 'M')) return 1;
    const auto u16 = [&](size_t at) -> uint32_t {
      return le ? tiff[at] | (tiff[at + 1] << 8) : (tiff[at] << 8) | tiff[at + 1];
    };
    const auto u32 = [&](size_t at) { return le ? u16(at) | (u16(at + 2) << 16)
                                                : (u16(at) << 16) | u16(at + 2); };
    const size_t ifd = u32(4);
    if (ifd > size - 2) return 1;
    const size_t entries = u16(ifd);
    for (size_t i = 0; i < entries; ++i) {
      const size_t at = ifd + 2 + i * 12;
      if (at > size - 12) return 1;
      if (u16(at) == 0x0112 && u16(at + 2) == 3) {  // Orientation, SHORT
        const uint32_t value = u16(at + 8);
        return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
      }
    }
    return 1;
  }
  return 1;
}

// What OpenCV's imdecode does for each EXIF orientation.
void Orient(cv::Mat& img, int orientation) {
  if (orientation >= 5) cv::transpose(img, img);
  switch (orientation) {
    case 2: case 6: cv::flip(img, img, 1); break;
    case 3: case 7: cv::flip(img, img, -1); break;
    case 4: case 8: cv::flip(img, img, 0); break;
    default: break;
  }
}

// Adobe's inverted CMYK (what libjpeg hands back for CMYK and YCCK files) to BGR, one row.
void CmykToBgr(const uint8_t* cmyk, uint8_t* bgr, int width) {
  for (int x = 0; x < width; ++x, cmyk += 4, bgr += 3) {
    const int k = cmyk[3];
    bgr[0] = static_cast<uint8_t>((cmyk[2] * k + 127) / 255);
    bgr[1] = static_cast<uint8_t>((cmyk[1] * k + 127) / 255);
    bgr[2] = static_cast<uint8_t>((cmyk[0] * k + 127) / 255);
  }
}

// The decode itself, between setjmp and any error: false when libjpeg stopped (the reason is
// in `guard`). Holds no object with a destructor; `out` and `cmyk_row` are the caller's.
bool Decode(jpeg_decompress_struct& cinfo, Guard& guard, std::string_view encoded, bool grey,
            cv::Mat& out, int& orientation) {
  if (setjmp(guard.jump)) return false;
  jpeg_create_decompress(&cinfo);
  cinfo.progress = &guard.progress;
  jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(encoded.data()),
               static_cast<unsigned long>(encoded.size()));
  if (jpeg_read_header(&cinfo, TRUE) != JPEG_HEADER_OK) {
    std::snprintf(guard.message, sizeof(guard.message), "holds tables but no image");
    return false;
  }
  orientation = ExifOrientation(cinfo.marker_list);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : grey ? JCS_GRAYSCALE : JCS_EXT_BGR;
  jpeg_start_decompress(&cinfo);
  const int width = static_cast<int>(cinfo.output_width);
  out.create(static_cast<int>(cinfo.output_height), width, cmyk || !grey ? CV_8UC3 : CV_8UC1);
  JSAMPARRAY row = cmyk ? (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo),
                                                      JPOOL_IMAGE, cinfo.output_width * 4, 1)
                        : nullptr;
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t* dst = out.ptr<uint8_t>(static_cast<int>(cinfo.output_scanline));
    JSAMPROW target = cmyk ? row[0] : dst;
    if (jpeg_read_scanlines(&cinfo, &target, 1) != 1) {
      std::snprintf(guard.message, sizeof(guard.message), "stopped before its last row");
      return false;
    }
    if (cmyk) CmykToBgr(row[0], dst, width);
  }
  jpeg_finish_decompress(&cinfo);
  return true;
}

}  // namespace

Result<cv::Mat> DecodeJpeg(std::string_view encoded, bool grey, Clock::time_point deadline) {
  jpeg_decompress_struct cinfo{};
  Guard guard{};
  cinfo.err = jpeg_std_error(&guard.base);
  guard.base.error_exit = Stop;
  guard.base.emit_message = OnMessage;
  guard.progress.progress_monitor = OnProgress;
  guard.deadline = deadline;
  cv::Mat out;
  int orientation = 1;
  bool ok = false;
  try {  // an allocation failure (cv::Mat) is thrown from Decode's own frame, not libjpeg's
    ok = Decode(cinfo, guard, encoded, grey, out, orientation);
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  jpeg_destroy_decompress(&cinfo);
  if (guard.deadline_passed) {
    return DeadlineExceeded("pre-processing stopped: the request's deadline passed while a JPEG "
                            "image was decoded");
  }
  if (guard.too_many_scans) {
    return InvalidArgument("JPEG image with more than " + std::to_string(kMaxScans) + " scans");
  }
  if (!ok) {
    return InvalidArgument(std::string("JPEG image that is truncated or corrupt (") +
                           guard.message + ")");
  }
  if (grey && out.channels() == 3) cv::cvtColor(out, out, cv::COLOR_BGR2GRAY);
  Orient(out, orientation);
  return out;
}

}  // namespace mmserve
