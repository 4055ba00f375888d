#include "backend/opencv/onnx_graph.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <limits>
#include <set>

namespace mmserve {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

constexpr int kMaxValues = 4096;  // graph inputs or outputs
constexpr int kMaxRank = 64;

constexpr uint32_t kVarint = WireFormatLite::WIRETYPE_VARINT;
constexpr uint32_t kBytes = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

// Calls `read(field, wire_type)` for each field of the message that `in` is limited to; `read`
// returns false on a malformed field, or calls Skip() for one it does not want.
template <typename Fn>
bool EachField(CodedInputStream& in, Fn&& read) {
  for (;;) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return in.ConsumedEntireMessage();
    if (!read(tag >> 3, tag & 7, tag)) return false;
  }
}

bool Skip(CodedInputStream& in, uint32_t tag) { return WireFormatLite::SkipField(&in, tag); }

// Runs `read` over the embedded message that starts at the cursor.
template <typename Fn>
bool Embedded(CodedInputStream& in, Fn&& read) {
  uint32_t length = 0;
  if (!in.ReadVarint32(&length)) return false;
  const auto limit = in.PushLimit(static_cast<int>(
      std::min<uint32_t>(length, static_cast<uint32_t>(std::numeric_limits<int>::max()))));
  const bool ok = read() && in.BytesUntilLimit() == 0;
  in.PopLimit(limit);
  return ok;
}

bool String(CodedInputStream& in, std::string* out) {
  uint32_t length = 0;
  return in.ReadVarint32(&length) &&
         in.ReadString(
             out, static_cast<int>(std::min<uint32_t>(length, std::numeric_limits<int>::max())));
}

bool Int64(CodedInputStream& in, int64_t* out) {
  uint64_t v = 0;
  if (!in.ReadVarint64(&v)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

// TensorShapeProto.Dimension: dim_value = 1, dim_param = 2.
bool ReadDimension(CodedInputStream& in, int64_t* dim) {
  *dim = -1;
  return EachField(in, [&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (field == 1 && wire == kVarint) {
      int64_t v = 0;
      if (!Int64(in, &v)) return false;
      *dim = v > 0 ? v : -1;
      return true;
    }
    return Skip(in, tag);  // dim_param: symbolic, stays -1
  });
}

// TypeProto.Tensor: elem_type = 1, shape = 2 (TensorShapeProto: dim = 1).
bool ReadTensorType(CodedInputStream& in, OnnxValue* value) {
  return EachField(in, [&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (field == 1 && wire == kVarint) {
      int64_t t = 0;
      if (!Int64(in, &t)) return false;
      value->elem_type = static_cast<int>(std::clamp<int64_t>(t, 0, 1 << 16));
      return true;
    }
    if (field == 2 && wire == kBytes) {
      value->has_shape = true;
      value->shape.clear();
      return Embedded(in, [&] {
        return EachField(in, [&](uint32_t f, uint32_t w, uint32_t t) {
          if (f != 1 || w != kBytes) return Skip(in, t);
          if (value->shape.size() >= kMaxRank) return false;
          int64_t dim = -1;
          if (!Embedded(in, [&] { return ReadDimension(in, &dim); })) return false;
          value->shape.push_back(dim);
          return true;
        });
      });
    }
    return Skip(in, tag);
  });
}

// ValueInfoProto: name = 1, type = 2 (TypeProto: tensor_type = 1).
bool ReadValueInfo(CodedInputStream& in, OnnxValue* value) {
  return EachField(in, [&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (field == 1 && wire == kBytes) return String(in, &value->name);
    if (field == 2 && wire == kBytes) {
      return Embedded(in, [&] {
        return EachField(in, [&](uint32_t f, uint32_t w, uint32_t t) {
          if (f == 1 && w == kBytes) return Embedded(in, [&] { return ReadTensorType(in, value); });
          return Skip(in, t);
        });
      });
    }
    return Skip(in, tag);
  });
}

// NodeProto: name = 3, op_type = 4, domain = 7.
bool ReadNode(CodedInputStream& in, OnnxNode* node) {
  return EachField(in, [&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (wire == kBytes && field == 3) return String(in, &node->name);
    if (wire == kBytes && field == 4) return String(in, &node->op_type);
    if (wire == kBytes && field == 7) return String(in, &node->domain);
    return Skip(in, tag);
  });
}

// TensorProto (an initializer): name = 8; its data is skipped, not copied.
bool ReadInitializerName(CodedInputStream& in, std::string* name) {
  return EachField(in, [&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (field == 8 && wire == kBytes) return String(in, name);
    return Skip(in, tag);
  });
}

// GraphProto: node = 1, initializer = 5, input = 11, output = 12.
bool ReadGraph(CodedInputStream& in, OnnxGraph* graph, std::set<std::string>* initializers) {
  return EachField(in, [&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (wire != kBytes) return Skip(in, tag);
    switch (field) {
      case 1: {
        OnnxNode node;
        if (!Embedded(in, [&] { return ReadNode(in, &node); })) return false;
        graph->nodes.push_back(std::move(node));
        return true;
      }
      case 5: {
        std::string name;
        if (!Embedded(in, [&] { return ReadInitializerName(in, &name); })) return false;
        initializers->insert(std::move(name));
        return true;
      }
      case 11:
      case 12: {
        auto& values = field == 11 ? graph->inputs : graph->outputs;
        if (values.size() >= kMaxValues) return false;
        OnnxValue value;
        if (!Embedded(in, [&] { return ReadValueInfo(in, &value); })) return false;
        values.push_back(std::move(value));
        return true;
      }
      default:
        return Skip(in, tag);
    }
  });
}

}  // namespace

Result<OnnxGraph> ReadOnnxGraph(std::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument("an ONNX file over 2 GiB (weights in external data are not supported)");
  }
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                      static_cast<int>(bytes.size()));
  OnnxGraph graph;
  std::set<std::string> initializers;
  bool has_graph = false;
  // ModelProto: ir_version = 1, graph = 7, opset_import = 8 (domain = 1, version = 2).
  const bool ok = EachField(in, [&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (field == 1 && wire == kVarint) return Int64(in, &graph.ir_version);
    if (field == 7 && wire == kBytes) {
      has_graph = true;
      return Embedded(in, [&] { return ReadGraph(in, &graph, &initializers); });
    }
    if (field == 8 && wire == kBytes) {
      std::string domain;
      int64_t version = 0;
      if (!Embedded(in, [&] {
            return EachField(in, [&](uint32_t f, uint32_t w, uint32_t t) {
              if (f == 1 && w == kBytes) return String(in, &domain);
              if (f == 2 && w == kVarint) return Int64(in, &version);
              return Skip(in, t);
            });
          })) {
        return false;
      }
      if (domain.empty() || domain == "ai.onnx") graph.opset = version;
      return true;
    }
    return Skip(in, tag);
  });
  if (!ok) return InvalidArgument("not an ONNX model: its protobuf encoding is malformed");
  if (!has_graph || graph.ir_version <= 0) {
    return InvalidArgument("not an ONNX model: no ir_version or graph");
  }
  std::erase_if(graph.inputs, [&](const OnnxValue& v) { return initializers.count(v.name) > 0; });
  return graph;
}

std::optional<DataType> OnnxDataType(int elem_type) {
  switch (elem_type) {
    case 1:
      return DataType::kFp32;
    case 2:
      return DataType::kUint8;
    case 3:
      return DataType::kInt8;
    case 4:
      return DataType::kUint16;
    case 5:
      return DataType::kInt16;
    case 6:
      return DataType::kInt32;
    case 7:
      return DataType::kInt64;
    case 8:
      return DataType::kBytes;
    case 9:
      return DataType::kBool;
    case 10:
      return DataType::kFp16;
    case 11:
      return DataType::kFp64;
    case 12:
      return DataType::kUint32;
    case 13:
      return DataType::kUint64;
    case 16:
      return DataType::kBf16;
    default:
      return std::nullopt;
  }
}

std::string OnnxTypeName(int elem_type) {
  static const char* kNames[] = {"UNDEFINED",  "FLOAT",   "UINT8",  "INT8",   "UINT16",
                                 "INT16",      "INT32",   "INT64",  "STRING", "BOOL",
                                 "FLOAT16",    "DOUBLE",  "UINT32", "UINT64", "COMPLEX64",
                                 "COMPLEX128", "BFLOAT16"};
  if (elem_type >= 0 && elem_type < static_cast<int>(std::size(kNames))) return kNames[elem_type];
  return "type " + std::to_string(elem_type);
}

}  // namespace mmserve
