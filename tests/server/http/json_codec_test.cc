#include "server/http/json_codec.h"

#include <cstring>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct TypeCase {
  std::string datatype;
  json data;
  friend void PrintTo(const TypeCase& c, std::ostream* os) { *os << c.datatype; }
};

class JsonCodecTypeTest : public ::testing::TestWithParam<TypeCase> {};

// The answer to a request for `t`, as another JSON library reads it.
json Encoded(const InferResponse& response) {
  ResponseContext ctx;
  ctx.model_name = "m";
  const std::string body = EncodeInferResponse(response, ctx).body;
  return json::parse(body);
}

json DataOf(const Tensor& t) {
  InferResponse response;
  response.outputs.push_back(t);
  return Encoded(response)["outputs"][0]["data"];
}

TEST_P(JsonCodecTypeTest, EveryDatatypeRoundTripsThroughJson) {
  const auto& c = GetParam();
  json body = {{"inputs",
                {{{"name", "x"}, {"datatype", c.datatype}, {"shape", {2}}, {"data", c.data}}}}};
  auto parsed = ParseInferRequest(body.dump(), std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Tensor& t = parsed->request.inputs[0];
  EXPECT_EQ(DataTypeName(t.type()), c.datatype);
  EXPECT_TRUE(t.Validate().ok());
  EXPECT_EQ(DataOf(t), c.data);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, JsonCodecTypeTest,
    ::testing::Values(TypeCase{"BOOL", {true, false}}, TypeCase{"UINT8", {0, 255}},
                      TypeCase{"UINT16", {1, 65535}}, TypeCase{"UINT32", {1, 4294967295u}},
                      TypeCase{"UINT64", {1, 18446744073709551615ull}},
                      TypeCase{"INT8", {-128, 127}}, TypeCase{"INT16", {-32768, 32767}},
                      TypeCase{"INT32", {-2147483647 - 1, 2147483647}},
                      TypeCase{"INT64", {-9223372036854775807ll - 1, 9223372036854775807ll}},
                      TypeCase{"FP16", {1.5, -0.0009765625}}, TypeCase{"BF16", {1.5, -256.0}},
                      TypeCase{"FP32", {0.25, -3.5}}, TypeCase{"FP64", {0.1, -1e300}},
                      TypeCase{"BYTES", {"héllo", ""}}),
    [](const auto& info) { return info.param.datatype; });

TEST(JsonCodecTest, Fp16RoundsToNearestAndSaturatesToInfinity) {
  json body = {{"inputs",
                {{{"name", "x"},
                  {"datatype", "FP16"},
                  {"shape", {4}},
                  {"data", {65504.0, 1e6, 5.960464477539063e-08, 1.0009765625}}}}}};
  auto parsed = ParseInferRequest(body.dump(), std::nullopt);
  ASSERT_TRUE(parsed.ok());
  const std::string& d = parsed->request.inputs[0].data();
  uint16_t h[4];
  std::memcpy(h, d.data(), 8);
  EXPECT_EQ(h[0], 0x7bff);  // the largest finite half
  EXPECT_EQ(h[1], 0x7c00);  // +inf
  EXPECT_EQ(h[2], 0x0001);  // the smallest subnormal
  EXPECT_EQ(h[3], 0x3c01);
}

TEST(JsonCodecTest, NestedDataIsFlattenedRowMajor) {
  json body = {{"inputs",
                {{{"name", "x"}, {"datatype", "INT32"}, {"shape", {2, 2}}, {"data", {{1, 2}, {3, 4}}}}}}};
  auto parsed = ParseInferRequest(body.dump(), std::nullopt);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(DataOf(parsed->request.inputs[0]), json({1, 2, 3, 4}));
}

TEST(JsonCodecTest, Base64ContentIsDecodedAndOnlyForBytes) {
  auto parsed = ParseInferRequest(
      R"({"inputs":[{"name":"B","datatype":"BYTES","shape":[2],)"
      R"("parameters":{"content_type":"base64"},"data":["Zm9v","/wCA"]}]})",
      std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto elements = parsed->request.inputs[0].BytesElements();
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(elements[0], "foo");
  EXPECT_EQ(elements[1], std::string("\xff\x00\x80", 3));
  parsed = ParseInferRequest(
      R"({"inputs":[{"name":"B","datatype":"BYTES","shape":[1],)"
      R"("parameters":{"content_type":"str"},"data":["Zm9v"]}]})",
      std::nullopt);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->request.inputs[0].BytesElements()[0], "Zm9v");
  parsed = ParseInferRequest(
      R"({"inputs":[{"name":"X","datatype":"INT32","shape":[1],)"
      R"("parameters":{"content_type":"base64"},"data":[1]}]})",
      std::nullopt);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("inputs[0] ('X').parameters.content_type: \"base64\" is for a BYTES "
                        "tensor, not INT32"));
}

TEST(JsonCodecTest, ErrorsNameTheField) {
  auto error = [](const std::string& body) {
    auto parsed = ParseInferRequest(body, std::nullopt);
    EXPECT_FALSE(parsed.ok());
    return std::string(parsed.status().message());
  };
  EXPECT_THAT(error("{\"inputs\": [}"), ::testing::StartsWith("request body is not valid JSON: "));
  EXPECT_EQ(error("{}"), "inputs: expected an array of tensors");
  EXPECT_EQ(error(R"({"inputs":[{"name":"x","datatype":"FLOAT","shape":[1],"data":[1]}]})"),
            "inputs[0] ('x').datatype: unknown datatype \"FLOAT\"");
  EXPECT_EQ(error(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[2],"data":[1]}]})"),
            "inputs[0] ('x').data: shape [2] needs 2 elements, found 1");
  EXPECT_EQ(error(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]})"),
            "inputs[0] ('x').data[0]: 300 is not a valid INT8");
  EXPECT_EQ(error(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2,2],"data":[[1,2],[3,"4"]]}]})"),
            "inputs[0] ('x').data[3]: \"4\" is not a valid INT32");
  EXPECT_EQ(error(R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[1],"data":[-1]}]})"),
            "inputs[0] ('x').data[0]: -1 is not a valid UINT8");
  EXPECT_EQ(error(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1.5]}]})"),
            "inputs[0] ('x').data[0]: 1.5 is not a valid INT32");
  EXPECT_EQ(error(R"({"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"data":[1]}]})"),
            "inputs[0] ('x').data[0]: 1 is not a valid BYTES");
  EXPECT_EQ(error(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[-1],"data":[]}]})"),
            "inputs[0] ('x').shape: expected non-negative integers, found -1");
  EXPECT_EQ(error(R"({"inputs":[{"datatype":"INT32","shape":[1],"data":[1]}]})"),
            "inputs[0].name: expected a string");
}

TEST(JsonCodecTest, FloatsAreWrittenInTheShortestFormOfTheirOwnType) {
  const float fp32[] = {0.1f, 3.0f, -1e-30f, std::numeric_limits<float>::quiet_NaN()};
  InferResponse response;
  response.outputs.emplace_back("y", DataType::kFp32, Shape{4},
                                std::string(reinterpret_cast<const char*>(fp32), sizeof fp32));
  ResponseContext ctx;
  ctx.model_name = "m";
  const std::string body = EncodeInferResponse(response, ctx).body;
  // 0.1 as FP32, not its double widening 0.10000000149011612; a whole number stays a float;
  // NaN, which JSON cannot carry, is null.
  EXPECT_THAT(body, HasSubstr("\"data\":[0.1,3.0,-1e-30,null]")) << body;
}

template <typename T>
std::string Extremes(DataType type) {
  const T values[] = {std::numeric_limits<T>::lowest(), 0, std::numeric_limits<T>::max()};
  InferResponse response;
  response.outputs.emplace_back("y", type, Shape{3},
                                std::string(reinterpret_cast<const char*>(values), sizeof values));
  ResponseContext ctx;
  ctx.model_name = "m";
  const std::string body = EncodeInferResponse(response, ctx).body;
  const auto at = body.find("\"data\":");
  return at == std::string::npos ? body : body.substr(at + 7, body.find(']', at) - at - 6);
}

TEST(JsonCodecTest, EveryIntegerTypeWritesItsWidestValuesWhole) {
  EXPECT_EQ(Extremes<int8_t>(DataType::kInt8), "[-128,0,127]");
  EXPECT_EQ(Extremes<uint8_t>(DataType::kUint8), "[0,0,255]");
  EXPECT_EQ(Extremes<int16_t>(DataType::kInt16), "[-32768,0,32767]");
  EXPECT_EQ(Extremes<uint16_t>(DataType::kUint16), "[0,0,65535]");
  EXPECT_EQ(Extremes<int32_t>(DataType::kInt32), "[-2147483648,0,2147483647]");
  EXPECT_EQ(Extremes<uint32_t>(DataType::kUint32), "[0,0,4294967295]");
  EXPECT_EQ(Extremes<int64_t>(DataType::kInt64), "[-9223372036854775808,0,9223372036854775807]");
  EXPECT_EQ(Extremes<uint64_t>(DataType::kUint64), "[0,0,18446744073709551615]");
  EXPECT_EQ(Extremes<double>(DataType::kFp64),
            "[-1.7976931348623157e+308,0.0,1.7976931348623157e+308]");
}

TEST(JsonCodecTest, TheResponseEscapesNamesAndCarriesParameters) {
  InferResponse response;
  response.outputs.emplace_back("a \"quoted\"\nname", DataType::kInt32, Shape{1},
                                std::string(4, '\0'));
  response.parameters = {{"done", true}, {"tokens", int64_t{7}}, {"score", 0.5},
                         {"reason", std::string("stop")}};
  const json doc = Encoded(response);
  EXPECT_EQ(doc["model_name"], "m");
  EXPECT_EQ(doc["model_version"], "1");
  EXPECT_EQ(doc["outputs"][0]["name"], "a \"quoted\"\nname");
  EXPECT_EQ(doc["outputs"][0]["shape"], json({1}));
  EXPECT_EQ(doc["parameters"],
            json({{"done", true}, {"tokens", 7}, {"score", 0.5}, {"reason", "stop"}}));
}

TEST(JsonCodecTest, ParametersOfEveryKindAreRead) {
  auto parsed = ParseInferRequest(
      R"({"id":"r1","parameters":{"a":true,"b":-3,"c":2.5,"d":"x"},)"
      R"("inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1]}]})",
      std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const RequestParams& p = parsed->request.parameters;
  EXPECT_EQ(std::get<bool>(p.at("a")), true);
  EXPECT_EQ(std::get<int64_t>(p.at("b")), -3);
  EXPECT_EQ(std::get<double>(p.at("c")), 2.5);
  EXPECT_EQ(std::get<std::string>(p.at("d")), "x");
  EXPECT_EQ(parsed->response.id, "r1");
  auto nested = ParseInferRequest(
      R"({"parameters":{"a":[1]},"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1]}]})",
      std::nullopt);
  EXPECT_EQ(std::string(nested.status().message()),
            "parameters.a: expected a string, number or bool, found [1]");
}

TEST(JsonCodecTest, BinaryTensorsFollowTheJsonHeader) {
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"b","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":7}}],)"
      R"("outputs":[{"name":"a_out","parameters":{"binary_data":true}},{"name":"b_out"}]})";
  const float floats[2] = {1.5f, -2.0f};
  std::string body = header + std::string(reinterpret_cast<const char*>(floats), 8);
  Tensor::AppendBytesElement(body, "abc");
  auto parsed = ParseInferRequest(body, header.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->request.inputs[0].data(), std::string(reinterpret_cast<const char*>(floats), 8));
  EXPECT_EQ(parsed->request.inputs[1].BytesElements()[0], "abc");
  EXPECT_EQ(parsed->request.requested_outputs, (std::vector<std::string>{"a_out", "b_out"}));
  EXPECT_EQ(parsed->response.binary, std::vector<std::string>{"a_out"});

  InferResponse response;
  response.outputs.emplace_back("a_out", DataType::kFp32, Shape{2}, parsed->request.inputs[0].data());
  response.outputs.emplace_back("b_out", DataType::kBytes, Shape{1}, parsed->request.inputs[1].data());
  ResponseContext ctx = parsed->response;
  ctx.model_name = "m";
  EncodedResponse encoded = EncodeInferResponse(response, ctx);
  ASSERT_TRUE(encoded.header_length.has_value());
  json doc = json::parse(encoded.body.substr(0, *encoded.header_length));
  EXPECT_EQ(doc["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_EQ(doc["outputs"][1]["data"], json({"abc"}));
  EXPECT_EQ(encoded.body.substr(*encoded.header_length),
            std::string(reinterpret_cast<const char*>(floats), 8));
}

TEST(JsonCodecTest, BinarySizesMustAddUp) {
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  auto short_body = ParseInferRequest(header + "1234", header.size());
  EXPECT_THAT(std::string(short_body.status().message()),
              HasSubstr("binary_data_size: 8 bytes, but only 4 binary bytes remain"));
  auto long_body = ParseInferRequest(header + "123456789", header.size());
  EXPECT_THAT(std::string(long_body.status().message()),
              HasSubstr("1 binary bytes that no input's binary_data_size accounts for"));
  auto wrong_header = ParseInferRequest(header, header.size() + 5);
  EXPECT_FALSE(wrong_header.ok());
}

TEST(JsonCodecTest, RawRequestDerivesTheVariableDimension) {
  ModelSignature sig{.inputs = {{"x", DataType::kInt16, {-1, 2}}}};
  auto parsed = ParseRawInferRequest(std::string(12, '\1'), sig);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->request.inputs[0].shape(), (Shape{3, 2}));
  EXPECT_TRUE(parsed->response.raw);
  EXPECT_FALSE(ParseRawInferRequest(std::string(5, '\1'), sig).ok());
  ModelSignature two{.inputs = {{"x", DataType::kInt8, {-1}}, {"y", DataType::kInt8, {-1}}}};
  EXPECT_FALSE(ParseRawInferRequest("ab", two).ok());
}

}  // namespace
}  // namespace mmserve
