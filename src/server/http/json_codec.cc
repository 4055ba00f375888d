#include "server/http/json_codec.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "common/float16.h"
#include "common/json.h"
#include "common/strings.h"
#include "server/http/json_writer.h"

namespace mmserve {
namespace {

namespace dom = simdjson::dom;

// ---- JSON data → tensor bytes ---------------------------------------------------------------

// One simdjson parser per thread: it keeps its buffers between requests, so a steady stream of
// requests parses without allocating. A parser grown past this by one large body is dropped
// after it, so that no thread keeps a large request's buffers.
constexpr size_t kKeepParserBytes = size_t{1} << 20;

class ThreadParser {
 public:
  ThreadParser() : parser_(Get()) {}
  ~ThreadParser() {
    if (parser_->capacity() > kKeepParserBytes) parser_ = std::make_unique<dom::parser>();
  }
  dom::parser& operator*() { return *parser_; }

 private:
  static std::unique_ptr<dom::parser>& Get() {
    thread_local std::unique_ptr<dom::parser> parser = std::make_unique<dom::parser>();
    return parser;
  }
  std::unique_ptr<dom::parser>& parser_;
};

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

// Elements of `value` with nested arrays flattened (a scalar counts as one).
[[gnu::flatten]] int64_t CountElements(dom::element value) {
  if (!value.is_array()) return 1;
  int64_t n = 0;
  for (dom::element e : dom::array(value)) n += e.is_array() ? CountElements(e) : 1;
  return n;
}

template <typename T>
bool PutInteger(dom::element e, std::string& out) {
  uint64_t v;  // the value's bits; INT64 holds every integer up to INT64_MAX, UINT64 the rest
  bool negative = false;
  switch (e.type()) {
    case dom::element_type::INT64: {
      const int64_t i = e.get_int64().value_unsafe();
      negative = i < 0;
      v = static_cast<uint64_t>(i);
      break;
    }
    case dom::element_type::UINT64:
      v = e.get_uint64().value_unsafe();
      break;
    default:
      return false;
  }
  if (negative) {
    if constexpr (std::is_unsigned_v<T>) {
      return false;
    } else {
      if (static_cast<int64_t>(v) < std::numeric_limits<T>::min()) return false;
    }
  } else if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    return false;
  }
  Put<T>(out, static_cast<T>(v));
  return true;
}

bool PutBool(dom::element e, std::string& out) {
  if (!e.is_bool()) return false;
  Put<uint8_t>(out, e.get_bool().value_unsafe() ? 1 : 0);
  return true;
}

template <DataType kType>
bool PutFloat(dom::element e, std::string& out) {
  double v;
  if (e.get_double().get(v)) return false;  // not a number
  if constexpr (kType == DataType::kFp64) Put<double>(out, v);
  if constexpr (kType == DataType::kFp32) Put<float>(out, static_cast<float>(v));
  if constexpr (kType == DataType::kFp16) Put<uint16_t>(out, FloatToHalf(static_cast<float>(v)));
  if constexpr (kType == DataType::kBf16) Put<uint16_t>(out, FloatToBf16(static_cast<float>(v)));
  return true;
}

bool PutString(dom::element e, std::string& out) {
  std::string_view v;
  if (e.get_string().get(v)) return false;
  Tensor::AppendBytesElement(out, v);
  return true;
}

// Puts the elements of `value` (nested arrays flattened) into `out` with `put`; on an element
// `put` refuses, returns false with its flat index in `index` and the element in `bad`.
// Flattened: simdjson's element accessors are not inlined otherwise, which doubled the time.
template <typename PutOne>
[[gnu::flatten]] bool PutAll(dom::element value, std::string& out, int64_t& index,
                             dom::element& bad, PutOne put) {
  if (!value.is_array()) {
    if (!put(value, out)) {
      bad = value;
      return false;
    }
    ++index;
    return true;
  }
  // Scalars in the loop, only a nested array by recursion: a call per value cost as much as
  // storing it.
  for (dom::element e : dom::array(value)) {
    if (e.is_array()) {
      if (!PutAll(e, out, index, bad, put)) return false;
    } else if (put(e, out)) {
      ++index;
    } else {
      bad = e;
      return false;
    }
  }
  return true;
}

// A lambda calling `put`: a type of its own, so that PutAll's calls are direct (and flattened)
// instead of through a function pointer.
template <auto put>
auto AsLambda() {
  return [](dom::element e, std::string& out) { return put(e, out); };
}

bool PutElements(DataType type, dom::element value, std::string& out, int64_t& index,
                 dom::element& bad) {
  switch (type) {
    case DataType::kBool:
      return PutAll(value, out, index, bad, AsLambda<PutBool>());
    case DataType::kUint8:
      return PutAll(value, out, index, bad, AsLambda<PutInteger<uint8_t>>());
    case DataType::kUint16:
      return PutAll(value, out, index, bad, AsLambda<PutInteger<uint16_t>>());
    case DataType::kUint32:
      return PutAll(value, out, index, bad, AsLambda<PutInteger<uint32_t>>());
    case DataType::kUint64:
      return PutAll(value, out, index, bad, AsLambda<PutInteger<uint64_t>>());
    case DataType::kInt8:
      return PutAll(value, out, index, bad, AsLambda<PutInteger<int8_t>>());
    case DataType::kInt16:
      return PutAll(value, out, index, bad, AsLambda<PutInteger<int16_t>>());
    case DataType::kInt32:
      return PutAll(value, out, index, bad, AsLambda<PutInteger<int32_t>>());
    case DataType::kInt64:
      return PutAll(value, out, index, bad, AsLambda<PutInteger<int64_t>>());
    case DataType::kFp16:
      return PutAll(value, out, index, bad, AsLambda<PutFloat<DataType::kFp16>>());
    case DataType::kBf16:
      return PutAll(value, out, index, bad, AsLambda<PutFloat<DataType::kBf16>>());
    case DataType::kFp32:
      return PutAll(value, out, index, bad, AsLambda<PutFloat<DataType::kFp32>>());
    case DataType::kFp64:
      return PutAll(value, out, index, bad, AsLambda<PutFloat<DataType::kFp64>>());
    case DataType::kBytes:
      return PutAll(value, out, index, bad, AsLambda<PutString>());
  }
  return false;
}

std::string Describe(dom::element e) {
  std::string s = simdjson::minify(e);
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

// The member `key` of `object`, or a null element when it has none.
std::optional<dom::element> Member(dom::object object, std::string_view key) {
  dom::element e;
  if (object.at_key(key).get(e)) return std::nullopt;
  return e;
}

// A field's path for error messages, such as "inputs[0] ('X')" + ".shape": joined only when an
// error names it, not for every request.
struct FieldPath {
  std::string_view parent;
  std::string_view field;
  std::string str() const { return std::string(parent).append(field); }
};

Result<RequestParams> ParseParameters(std::optional<dom::element> params, FieldPath where) {
  RequestParams out;
  if (!params || params->is_null()) return out;
  if (!params->is_object()) return InvalidArgument(where.str() + ": expected an object");
  for (dom::key_value_pair kv : dom::object(*params)) {
    std::string key(kv.key);
    const dom::element v = kv.value;
    switch (v.type()) {
      case dom::element_type::BOOL:
        out[key] = v.get_bool().value_unsafe();
        break;
      case dom::element_type::INT64:
        out[key] = v.get_int64().value_unsafe();
        break;
      case dom::element_type::UINT64:
      case dom::element_type::DOUBLE:
        out[key] = v.get_double().value_unsafe();
        break;
      case dom::element_type::STRING:
        out[key] = std::string(v.get_string().value_unsafe());
        break;
      default:
        return InvalidArgument(where.str() + "." + key +
                               ": expected a string, number or bool, found " +
                               Describe(v));
    }
  }
  return out;
}

Result<Shape> ParseShape(dom::element shape, FieldPath where) {
  if (!shape.is_array()) return InvalidArgument(where.str() + ": expected an array of integers");
  Shape out;
  for (dom::element d : dom::array(shape)) {
    if (d.type() != dom::element_type::INT64 || d.get_int64().value_unsafe() < 0) {
      return InvalidArgument(where.str() + ": expected non-negative integers, found " +
                             Describe(d));
    }
    out.push_back(d.get_int64().value_unsafe());
  }
  return out;
}

// The string member `key` of `object`, or nullopt when it is missing or not a string.
std::optional<std::string_view> StringMember(dom::object object, std::string_view key) {
  std::string_view v;
  if (object.at_key(key).get_string().get(v)) return std::nullopt;
  return v;
}


// An input's parameters.content_type (MLServer's and KServe's codecs): "base64", each BYTES
// element base64 text of binary bytes (an image in JSON); "str", the elements as they are.
// Anything else, or base64 on a numeric tensor, is refused: the bytes would be misread.
Result<Tensor> DecodeContent(Tensor tensor, const ParamValue& content_type,
                             const std::string& named) {
  const std::string field = named + ".parameters.content_type";
  const auto* kind = std::get_if<std::string>(&content_type);
  if (!kind || (*kind != "base64" && *kind != "str")) {
    return InvalidArgument(field + ": expected \"base64\" or \"str\"");
  }
  if (tensor.type() != DataType::kBytes) {
    return InvalidArgument(field + ": \"" + *kind + "\" is for a BYTES tensor, not " +
                           std::string(DataTypeName(tensor.type())));
  }
  if (*kind == "str") return tensor;
  std::string decoded;
  const auto elements = tensor.BytesElements();
  for (size_t i = 0; i < elements.size(); ++i) {
    auto bytes = Base64Decode(elements[i]);
    if (!bytes) {
      return InvalidArgument(named + ".data[" + std::to_string(i) +
                             "]: not base64 text (parameters.content_type is \"base64\")");
    }
    Tensor::AppendBytesElement(decoded, *bytes);
  }
  return Tensor(tensor.name(), DataType::kBytes, tensor.shape(), std::move(decoded));
}

Result<Tensor> ParseInput(dom::element element, size_t index, const std::string& body,
                          size_t& binary_offset) {
  const std::string where = "inputs[" + std::to_string(index) + "]";
  if (!element.is_object()) return InvalidArgument(where + ": expected an object");
  const dom::object input(element);
  const auto name_view = StringMember(input, "name");
  if (!name_view) return InvalidArgument(where + ".name: expected a string");
  std::string name(*name_view);
  const std::string named = where + " ('" + name + "')";
  const auto datatype = StringMember(input, "datatype");
  if (!datatype) return InvalidArgument(named + ".datatype: expected a string");
  const auto type = ParseDataType(*datatype);
  if (!type) {
    return InvalidArgument(named + ".datatype: unknown datatype " +
                           Describe(*Member(input, "datatype")));
  }
  const auto shape_element = Member(input, "shape");
  if (!shape_element) return InvalidArgument(named + ".shape: missing");
  MMS_ASSIGN_OR_RETURN(Shape shape, ParseShape(*shape_element, {named, ".shape"}));
  MMS_ASSIGN_OR_RETURN(RequestParams params,
                       ParseParameters(Member(input, "parameters"), {named, ".parameters"}));
  const auto count = ElementCount(shape);
  if (!count) return InvalidArgument(named + ".shape: too many elements");

  std::string data;
  if (auto it = params.find("binary_data_size"); it != params.end()) {
    if (!std::holds_alternative<int64_t>(it->second) || std::get<int64_t>(it->second) < 0) {
      return InvalidArgument(named +
                             ".parameters.binary_data_size: expected a non-negative "
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
    const auto values = Member(input, "data");
    if (!values) return InvalidArgument(named + ".data: missing");
    const int64_t found = CountElements(*values);
    if (found != *count) {
      return InvalidArgument(named + ".data: shape " + ShapeToString(shape) + " needs " +
                             std::to_string(*count) + " elements, found " + std::to_string(found));
    }
    if (*type != DataType::kBytes) data.reserve(static_cast<size_t>(found) * DataTypeSize(*type));
    int64_t put = 0;
    dom::element bad;
    if (!PutElements(*type, *values, data, put, bad)) {
      return InvalidArgument(named + ".data[" + std::to_string(put) + "]: " + Describe(bad) +
                             " is not a valid " + std::string(DataTypeName(*type)));
    }
  }
  Tensor tensor(std::move(name), *type, std::move(shape), std::move(data));
  MMS_RETURN_IF_ERROR(tensor.Validate());
  if (auto it = params.find("content_type"); it != params.end()) {
    MMS_ASSIGN_OR_RETURN(tensor, DecodeContent(std::move(tensor), it->second, named));
  }
  return tensor;
}

// ---- tensor bytes → JSON ----------------------------------------------------------------------

template <typename T>
void AppendIntegers(std::string& out, const std::string& d, size_t n) {
  AppendArray<kMaxIntegerChars<T>>(
      out, n, [&](char* p, size_t i) { return WriteInteger(p, Get<T>(d, i)); });
}

void AppendIntegers(std::string& out, const Shape& shape) {
  AppendArray<kMaxIntegerChars<int64_t>>(
      out, shape.size(), [&](char* p, size_t i) { return WriteInteger(p, shape[i]); });
}

template <typename T, typename Decode>
void AppendFloats(std::string& out, const std::string& d, size_t n, Decode decode) {
  AppendArray<kMaxNumberChars>(
      out, n, [&](char* p, size_t i) { return WriteFloat(p, decode(Get<T>(d, i))); });
}

void AppendData(std::string& out, const Tensor& t) {
  const auto& d = t.data();
  const size_t n =
      t.type() == DataType::kBytes ? 0 : d.size() / std::max<size_t>(1, DataTypeSize(t.type()));
  const auto same = [](auto v) { return v; };
  switch (t.type()) {
    case DataType::kBool:
      return AppendArray<5>(out, n, [&](char* p, size_t i) {
        return Get<uint8_t>(d, i) ? std::copy_n("true", 4, p) : std::copy_n("false", 5, p);
      });
    case DataType::kUint8:
      return AppendIntegers<uint8_t>(out, d, n);
    case DataType::kUint16:
      return AppendIntegers<uint16_t>(out, d, n);
    case DataType::kUint32:
      return AppendIntegers<uint32_t>(out, d, n);
    case DataType::kUint64:
      return AppendIntegers<uint64_t>(out, d, n);
    case DataType::kInt8:
      return AppendIntegers<int8_t>(out, d, n);
    case DataType::kInt16:
      return AppendIntegers<int16_t>(out, d, n);
    case DataType::kInt32:
      return AppendIntegers<int32_t>(out, d, n);
    case DataType::kInt64:
      return AppendIntegers<int64_t>(out, d, n);
    case DataType::kFp16:
      return AppendFloats<uint16_t>(out, d, n, HalfToFloat);
    case DataType::kBf16:
      return AppendFloats<uint16_t>(out, d, n, Bf16ToFloat);
    case DataType::kFp32:
      return AppendFloats<float>(out, d, n, same);
    case DataType::kFp64:
      return AppendFloats<double>(out, d, n, same);
    case DataType::kBytes: {
      out += '[';
      bool first = true;
      for (auto e : t.BytesElements()) {
        if (!first) out += ',';
        first = false;
        AppendString(out, e);
      }
      out += ']';
      return;
    }
  }
}

void AppendParam(std::string& out, const ParamValue& value) {
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, int64_t>) {
          AppendInteger(out, v);
        } else if constexpr (std::is_same_v<V, double>) {
          AppendFloat(out, v);
        } else {
          AppendString(out, v);
        }
      },
      value);
}

}  // namespace

Result<ParsedInferRequest> ParseInferRequest(const std::string& body,
                                             std::optional<size_t> header_length) {
  if (header_length && *header_length > body.size()) {
    return InvalidArgument("Inference-Header-Content-Length (" + std::to_string(*header_length) +
                           ") exceeds the body (" + std::to_string(body.size()) + " bytes)");
  }
  const size_t json_size = header_length.value_or(body.size());
  ThreadParser parser;
  dom::element element;
  if (auto error = (*parser).parse(body.data(), json_size).get(element)) {
    return InvalidArgument(std::string("request body is not valid JSON: ") +
                           simdjson::error_message(error));
  }
  if (!element.is_object()) return InvalidArgument("request body: expected a JSON object");
  const dom::object doc(element);

  ParsedInferRequest parsed;
  InferRequest& request = parsed.request;
  if (auto id = Member(doc, "id")) {
    if (!id->is_string()) return InvalidArgument("id: expected a string");
    request.id = std::string(id->get_string().value_unsafe());
  }
  MMS_ASSIGN_OR_RETURN(request.parameters,
                       ParseParameters(Member(doc, "parameters"), {"parameters"}));
  const auto inputs = Member(doc, "inputs");
  if (!inputs || !inputs->is_array()) {
    return InvalidArgument("inputs: expected an array of tensors");
  }
  size_t binary_offset = json_size;
  size_t i = 0;
  for (dom::element input : dom::array(*inputs)) {
    MMS_ASSIGN_OR_RETURN(Tensor t, ParseInput(input, i++, body, binary_offset));
    request.inputs.push_back(std::move(t));
  }
  if (binary_offset != body.size()) {
    return InvalidArgument("the body has " + std::to_string(body.size() - binary_offset) +
                           " binary bytes that no input's binary_data_size accounts for");
  }
  parsed.response.all_binary = BoolParam(request.parameters, "binary_data_output", false);
  if (auto outputs = Member(doc, "outputs")) {
    if (!outputs->is_array()) return InvalidArgument("outputs: expected an array");
    i = 0;
    for (dom::element o : dom::array(*outputs)) {
      const std::string where = "outputs[" + std::to_string(i++) + "]";
      const auto name = o.is_object() ? StringMember(dom::object(o), "name") : std::nullopt;
      if (!name) return InvalidArgument(where + ".name: expected a string");
      MMS_ASSIGN_OR_RETURN(RequestParams p, ParseParameters(Member(dom::object(o), "parameters"),
                                                            {where, ".parameters"}));
      request.requested_outputs.emplace_back(*name);
      if (BoolParam(p, "binary_data", false)) parsed.response.binary.emplace_back(*name);
    }
  }
  parsed.response.id = request.id;
  return parsed;
}

Result<ParsedInferRequest> ParseRawInferRequest(std::string body, const ModelSignature& signature) {
  if (signature.inputs.size() != 1) {
    return InvalidArgument(
        "raw binary requests (Inference-Header-Content-Length: 0) need a "
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

EncodedResponse EncodeInferResponse(const InferResponse& response, const ResponseContext& ctx) {
  EncodedResponse out;
  std::string& j = out.body;
  j.reserve(256);
  j += "{\"model_name\":";
  AppendString(j, ctx.model_name);
  j += ",\"model_version\":\"";
  AppendInteger(j, response.model_version != 0 ? response.model_version : ctx.model_version);
  j += '"';
  if (!ctx.id.empty()) {
    j += ",\"id\":";
    AppendString(j, ctx.id);
  }
  if (!response.parameters.empty()) {
    j += ",\"parameters\":{";
    bool first = true;
    for (const auto& [key, value] : response.parameters) {
      if (!first) j += ',';
      first = false;
      AppendString(j, key);
      j += ':';
      AppendParam(j, value);
    }
    j += '}';
  }
  j += ",\"outputs\":[";
  std::string binary;
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& t = response.outputs[i];
    if (i) j += ',';
    j += "{\"name\":";
    AppendString(j, t.name());
    j += ",\"datatype\":\"";
    j += DataTypeName(t.type());
    j += "\",\"shape\":";
    AppendIntegers(j, t.shape());
    const bool as_binary =
        ctx.raw || ctx.all_binary ||
        std::find(ctx.binary.begin(), ctx.binary.end(), t.name()) != ctx.binary.end();
    if (as_binary) {
      j += ",\"parameters\":{\"binary_data_size\":";
      AppendInteger(j, t.size_bytes());
      j += '}';
      binary += t.data();
    } else {
      j += ",\"data\":";
      AppendData(j, t);
    }
    j += '}';
  }
  j += "]}";
  if (!binary.empty() || ctx.raw || ctx.all_binary || !ctx.binary.empty()) {
    out.header_length = j.size();
    j += binary;
  }
  return out;
}

}  // namespace mmserve
