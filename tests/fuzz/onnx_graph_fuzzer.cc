// Fuzzes the ONNX graph reader (backend/opencv/onnx_graph.h): what validation reads of a model
// file before OpenCV sees it — protobuf wire format walked by hand, at a fixed depth.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backend/opencv/onnx_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)mmserve::ReadOnnxGraph(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
