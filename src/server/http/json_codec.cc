#include "server/http/json_codec.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace mmserve {
namespace {

using nlohmann::json;

// ---- 16-bit floats (round to nearest even) ---------------------------------------------------

uint16_t FloatToHalf(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  uint32_t mant = x & 0x7fffff;
  const int exp = static_cast<int>((x >> 23) & 0xff);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  const int e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const int shift = 14 - e;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // a carry rounds up the exponent
  return static_cast<uint16_t>(half);
}

float HalfToFloat(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    f = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    f = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  return (h & 0x8000) ? -f : f;
}

uint16_t FloatToBf16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if (std::isnan(value)) return 0x7fc0;
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// ---- JSON data → tensor bytes ---------------------------------------------------------------

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
T Get(const std::string& data, size_t i) {
  T v;
  std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
  return v;
}

void Flatten(const json& value, std::vector<const json*>& out) {
  if (value.is_array()) {
    for (const auto& e : value) Flatten(e, out);
  } else {
    out.push_back(&value);
  }
}

template <typename T>
bool PutInteger(const json& e, std::string& out) {
  if (e.is_number_unsigned()) {
    const auto v = e.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    Put<T>(out, static_cast<T>(v));
    return true;
  }
  if (e.is_number_integer()) {
    const auto v = e.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (v < 0 || static_cast<uint64_t>(v) > std::numeric_limits<T>::max()) return false;
    } else {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
    }
    Put<T>(out, static_cast<T>(v));
    return true;
  }
  return false;
}

bool PutElement(DataType type, const json& e, std::string& out) {
  switch (type) {
    case DataType::kBool:
      if (!e.is_boolean()) return false;
      Put<uint8_t>(out, e.get<bool>() ? 1 : 0);
      return true;
    case DataType::kUint8: return PutInteger<uint8_t>(e, out);
    case DataType::kUint16: return PutInteger<uint16_t>(e, out);
    case DataType::kUint32: return PutInteger<uint32_t>(e, out);
    case DataType::kUint64: return PutInteger<uint64_t>(e, out);
    case DataType::kInt8: return PutInteger<int8_t>(e, out);
    case DataType::kInt16: return PutInteger<int16_t>(e, out);
    case DataType::kInt32: return PutInteger<int32_t>(e, out);
    case DataType::kInt64: return PutInteger<int64_t>(e, out);
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kFp32:
    case DataType::kFp64: {
      if (!e.is_number()) return false;
      const double v = e.get<double>();
      if (type == DataType::kFp64) Put<double>(out, v);
      if (type == DataType::kFp32) Put<float>(out, static_cast<float>(v));
      if (type == DataType::kFp16) Put<uint16_t>(out, FloatToHalf(static_cast<float>(v)));
      if (type == DataType::kBf16) Put<uint16_t>(out, FloatToBf16(static_cast<float>(v)));
      return true;
    }
    case DataType::kBytes:
      if (!e.is_string()) return false;
      Tensor::AppendBytesElement(out, e.get_ref<const std::string&>());
      return true;
  }
  return false;
}

std::string Describe(const json& e) {
  std::string s = e.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

Result<RequestParams> ParseParameters(const json& params, const std::string& where) {
  RequestParams out;
  if (params.is_null()) return out;
  if (!params.is_object()) return InvalidArgument(where + ": expected an object");
  for (const auto& [key, v] : params.items()) {
    if (v.is_boolean()) {
      out[key] = v.get<bool>();
    } else if (v.is_number_integer()) {
      out[key] = v.get<int64_t>();
    } else if (v.is_number()) {
      out[key] = v.get<double>();
    } else if (v.is_string()) {
      out[key] = v.get<std::string>();
    } else {
      return InvalidArgument(where + "." + key + ": expected a string, number or bool, found " +
                             Describe(v));
    }
  }
  return out;
}

Result<Shape> ParseShape(const json& shape, const std::string& where) {
  if (!shape.is_array()) return InvalidArgument(where + ": expected an array of integers");
  Shape out;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return InvalidArgument(where + ": expected non-negative integers, found " + Describe(d));
    }
    out.push_back(d.get<int64_t>());
  }
  return out;
}

Result<Tensor> ParseInput(const json& input, size_t index, const std::string& body,
                          size_t& binary_offset) {
  const std::string where = "inputs[" + std::to_string(index) + "]";
  if (!input.is_object()) return InvalidArgument(where + ": expected an object");
  if (!input.contains("name") || !input["name"].is_string()) {
    return InvalidArgument(where + ".name: expected a string");
  }
  const std::string name = input["name"].get<std::string>();
  const std::string named = where + " ('" + name + "')";
  if (!input.contains("datatype") || !input["datatype"].is_string()) {
    return InvalidArgument(named + ".datatype: expected a string");
  }
  const auto type = ParseDataType(input["datatype"].get<std::string>());
  if (!type) {
    return InvalidArgument(named + ".datatype: unknown datatype " + Describe(input["datatype"]));
  }
  if (!input.contains("shape")) return InvalidArgument(named + ".shape: missing");
  MMS_ASSIGN_OR_RETURN(Shape shape, ParseShape(input["shape"], named + ".shape"));
  MMS_ASSIGN_OR_RETURN(RequestParams params,
                       ParseParameters(input.value("parameters", json()), named + ".parameters"));
  const auto count = ElementCount(shape);
  if (!count) return InvalidArgument(named + ".shape: too many elements");

  std::string data;
  if (auto it = params.find("binary_data_size"); it != params.end()) {
    if (!std::holds_alternative<int64_t>(it->second) || std::get<int64_t>(it->second) < 0) {
      return InvalidArgument(named + ".parameters.binary_data_size: expected a non-negative "
                             "integer");
    }
    const auto size = static_cast<size_t>(std::get<int64_t>(it->second));
    if (binary_offset > body.size() || body.size() - binary_offset < size) {
      return InvalidArgument(named + ".parameters.binary_data_size: " + std::to_string(size) +
                             " bytes, but only " +
                             std::to_string(body.size() - std::min(body.size(), binary_offset)) +
                             " binary bytes remain in the body");
    }
    data.assign(body, binary_offset, size);
    binary_offset += size;
  } else {
    if (!input.contains("data")) return InvalidArgument(named + ".data: missing");
    std::vector<const json*> elements;
    Flatten(input["data"], elements);
    if (static_cast<int64_t>(elements.size()) != *count) {
      return InvalidArgument(named + ".data: shape " + ShapeToString(shape) + " needs " +
                             std::to_string(*count) + " elements, found " +
                             std::to_string(elements.size()));
    }
    if (*type != DataType::kBytes) data.reserve(elements.size() * DataTypeSize(*type));
    for (size_t i = 0; i < elements.size(); ++i) {
      if (!PutElement(*type, *elements[i], data)) {
        return InvalidArgument(named + ".data[" + std::to_string(i) + "]: " +
                               Describe(*elements[i]) + " is not a valid " +
                               std::string(DataTypeName(*type)));
      }
    }
  }
  Tensor tensor(name, *type, std::move(shape), std::move(data));
  MMS_RETURN_IF_ERROR(tensor.Validate());
  return tensor;
}

}  // namespace

Result<ParsedInferRequest> ParseInferRequest(const std::string& body,
                                             std::optional<size_t> header_length) {
  if (header_length && *header_length > body.size()) {
    return InvalidArgument("Inference-Header-Content-Length (" + std::to_string(*header_length) +
                           ") exceeds the body (" + std::to_string(body.size()) + " bytes)");
  }
  const size_t json_size = header_length.value_or(body.size());
  json doc = json::parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(json_size),
                         nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("request body is not valid JSON");
  if (!doc.is_object()) return InvalidArgument("request body: expected a JSON object");

  ParsedInferRequest parsed;
  InferRequest& request = parsed.request;
  if (doc.contains("id")) {
    if (!doc["id"].is_string()) return InvalidArgument("id: expected a string");
    request.id = doc["id"].get<std::string>();
  }
  MMS_ASSIGN_OR_RETURN(request.parameters,
                       ParseParameters(doc.value("parameters", json()), "parameters"));
  if (!doc.contains("inputs") || !doc["inputs"].is_array()) {
    return InvalidArgument("inputs: expected an array of tensors");
  }
  size_t binary_offset = json_size;
  for (size_t i = 0; i < doc["inputs"].size(); ++i) {
    MMS_ASSIGN_OR_RETURN(Tensor t, ParseInput(doc["inputs"][i], i, body, binary_offset));
    request.inputs.push_back(std::move(t));
  }
  if (binary_offset != body.size()) {
    return InvalidArgument("the body has " + std::to_string(body.size() - binary_offset) +
                           " binary bytes that no input's binary_data_size accounts for");
  }
  parsed.response.all_binary = BoolParam(request.parameters, "binary_data_output", false);
  if (doc.contains("outputs")) {
    if (!doc["outputs"].is_array()) return InvalidArgument("outputs: expected an array");
    for (size_t i = 0; i < doc["outputs"].size(); ++i) {
      const auto& o = doc["outputs"][i];
      const std::string where = "outputs[" + std::to_string(i) + "]";
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) {
        return InvalidArgument(where + ".name: expected a string");
      }
      MMS_ASSIGN_OR_RETURN(RequestParams p,
                           ParseParameters(o.value("parameters", json()), where + ".parameters"));
      request.requested_outputs.push_back(o["name"].get<std::string>());
      if (BoolParam(p, "binary_data", false)) parsed.response.binary.push_back(o["name"]);
    }
  }
  parsed.response.id = request.id;
  return parsed;
}

Result<ParsedInferRequest> ParseRawInferRequest(std::string body,
                                                const ModelSignature& signature) {
  if (signature.inputs.size() != 1) {
    return InvalidArgument("raw binary requests (Inference-Header-Content-Length: 0) need a "
                           "model with exactly one input; this one has " +
                           std::to_string(signature.inputs.size()));
  }
  const TensorSpec& spec = signature.inputs[0];
  Shape shape = spec.shape;
  int variable = -1;
  int64_t fixed = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      if (variable >= 0) {
        return InvalidArgument("raw binary request: input '" + spec.name + "' has shape " +
                               ShapeToString(spec.shape) +
                               " with more than one variable dimension");
      }
      variable = static_cast<int>(i);
    } else {
      fixed *= shape[i];
    }
  }
  if (spec.type == DataType::kBytes) {
    if (variable >= 0) shape[variable] = fixed == 0 ? 0 : 1;
    std::string data;
    Tensor::AppendBytesElement(data, body);
    body = std::move(data);
  } else if (variable >= 0) {
    const size_t row = static_cast<size_t>(fixed) * DataTypeSize(spec.type);
    if (row == 0 || body.size() % row != 0) {
      return InvalidArgument("raw binary request: " + std::to_string(body.size()) +
                             " bytes do not divide into rows of " + std::to_string(row));
    }
    shape[variable] = static_cast<int64_t>(body.size() / row);
  }
  ParsedInferRequest parsed;
  parsed.request.inputs.emplace_back(spec.name, spec.type, std::move(shape), std::move(body));
  parsed.response.raw = true;
  return parsed;
}

json TensorDataToJson(const Tensor& t) {
  json out = json::array();
  const auto& d = t.data();
  const size_t n = t.type() == DataType::kBytes ? 0 : d.size() / std::max<size_t>(1, DataTypeSize(t.type()));
  switch (t.type()) {
    case DataType::kBool: for (size_t i = 0; i < n; ++i) out.push_back(Get<uint8_t>(d, i) != 0); break;
    case DataType::kUint8: for (size_t i = 0; i < n; ++i) out.push_back(Get<uint8_t>(d, i)); break;
    case DataType::kUint16: for (size_t i = 0; i < n; ++i) out.push_back(Get<uint16_t>(d, i)); break;
    case DataType::kUint32: for (size_t i = 0; i < n; ++i) out.push_back(Get<uint32_t>(d, i)); break;
    case DataType::kUint64: for (size_t i = 0; i < n; ++i) out.push_back(Get<uint64_t>(d, i)); break;
    case DataType::kInt8: for (size_t i = 0; i < n; ++i) out.push_back(Get<int8_t>(d, i)); break;
    case DataType::kInt16: for (size_t i = 0; i < n; ++i) out.push_back(Get<int16_t>(d, i)); break;
    case DataType::kInt32: for (size_t i = 0; i < n; ++i) out.push_back(Get<int32_t>(d, i)); break;
    case DataType::kInt64: for (size_t i = 0; i < n; ++i) out.push_back(Get<int64_t>(d, i)); break;
    case DataType::kFp16: for (size_t i = 0; i < n; ++i) out.push_back(HalfToFloat(Get<uint16_t>(d, i))); break;
    case DataType::kBf16: for (size_t i = 0; i < n; ++i) out.push_back(Bf16ToFloat(Get<uint16_t>(d, i))); break;
    case DataType::kFp32: for (size_t i = 0; i < n; ++i) out.push_back(Get<float>(d, i)); break;
    case DataType::kFp64: for (size_t i = 0; i < n; ++i) out.push_back(Get<double>(d, i)); break;
    case DataType::kBytes: for (auto e : t.BytesElements()) out.push_back(std::string(e)); break;
  }
  return out;
}

EncodedResponse EncodeInferResponse(const InferResponse& response, const ResponseContext& ctx) {
  json doc = {{"model_name", ctx.model_name},
              {"model_version", std::to_string(response.model_version != 0
                                                   ? response.model_version
                                                   : ctx.model_version)},
              {"outputs", json::array()}};
  if (!ctx.id.empty()) doc["id"] = ctx.id;
  if (!response.parameters.empty()) {
    json params = json::object();
    for (const auto& [key, value] : response.parameters) {
      std::visit([&](const auto& v) { params[key] = v; }, value);
    }
    doc["parameters"] = std::move(params);
  }
  std::string binary;
  for (const auto& t : response.outputs) {
    json o = {{"name", t.name()},
              {"datatype", std::string(DataTypeName(t.type()))},
              {"shape", t.shape()}};
    const bool as_binary = ctx.raw || ctx.all_binary ||
                           std::find(ctx.binary.begin(), ctx.binary.end(), t.name()) !=
                               ctx.binary.end();
    if (as_binary) {
      o["parameters"] = {{"binary_data_size", t.size_bytes()}};
      binary += t.data();
    } else {
      o["data"] = TensorDataToJson(t);
    }
    doc["outputs"].push_back(std::move(o));
  }
  EncodedResponse out;
  out.body = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!binary.empty() || ctx.raw || ctx.all_binary || !ctx.binary.empty()) {
    out.header_length = out.body.size();
    out.body += binary;
  }
  return out;
}

}  // namespace mmserve
