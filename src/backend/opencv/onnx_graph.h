// What an ONNX file's graph says — its opset, inputs, outputs and operators — read from the
// protobuf wire format without building the model, and bounded whatever the file holds.
//
// Why not OpenCV: cv::dnn::Net (4.6) does not tell the graph's input names or shapes, and a
// file it cannot import should still be described (which operator stops it). Why not the
// generated ONNX classes: they would copy every weight into memory to read a few names. This
// walks the few messages it needs with protobuf's CodedInputStream and skips the rest, at a
// fixed nesting depth (ModelProto → GraphProto → ValueInfoProto → TypeProto →
// TensorShapeProto).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "common/result.h"

namespace mmserve {

struct OnnxValue {
  std::string name;
  int elem_type = 0;  // onnx.TensorProto.DataType (1 = FLOAT)
  Shape shape;        // -1 for a symbolic or unknown dimension
  bool has_shape = false;
};

struct OnnxNode {
  std::string name;
  std::string op_type;
  std::string domain;
};

struct OnnxGraph {
  int64_t ir_version = 0;
  int64_t opset = 0;              // of the default domain ("" or "ai.onnx")
  std::vector<OnnxValue> inputs;  // graph inputs that are not initializers
  std::vector<OnnxValue> outputs;
  std::vector<OnnxNode> nodes;
};

// Reads the graph of the ONNX model in `bytes`. An error names what is malformed.
Result<OnnxGraph> ReadOnnxGraph(std::string_view bytes);

// The mmserve type of an ONNX element type, or nullopt for types mmserve cannot carry.
std::optional<DataType> OnnxDataType(int elem_type);
// "FLOAT", "INT64", ... for messages; "type <n>" for others.
std::string OnnxTypeName(int elem_type);

}  // namespace mmserve
