// JsonCodec: KServe v2 REST bodies ↔ InferRequest / InferResponse, including the binary tensor
// extension (Inference-Header-Content-Length). Exceptions from the JSON library stop here and
// become InvalidArgument statuses that name the field.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "common/result.h"

namespace mmserve {

struct ResponseContext;
struct ParsedInferRequest;

// Parses an infer request body. `header_length` is the Inference-Header-Content-Length value
// when the header is present: the JSON is the first `header_length` bytes and the binary tensors
// follow in input order.
Result<ParsedInferRequest> ParseInferRequest(const std::string& body,
                                             std::optional<size_t> header_length);

// Raw binary mode (Inference-Header-Content-Length: 0): the whole body is the single input of
// `signature`, batch-1. BadRequest when the model has more than one input or its shape cannot be
// derived from the byte count.
Result<ParsedInferRequest> ParseRawInferRequest(std::string body,
                                                const ModelSignature& signature);

struct EncodedResponse {
  std::string body;
  std::optional<size_t> header_length;  // set when binary tensors follow the JSON
};

struct ResponseContext {
  std::string model_name;
  int64_t model_version = 1;
  std::string id;
  bool all_binary = false;            // request parameter binary_data_output
  std::vector<std::string> binary;    // outputs asked for with binary_data: true
  bool raw = false;                   // raw binary request: all outputs binary
};

struct ParsedInferRequest {
  InferRequest request;
  ResponseContext response;  // model_name/version are filled by the caller
};

// Encodes a response; outputs requested in binary (or all, per `ctx`) follow the JSON header.
EncodedResponse EncodeInferResponse(const InferResponse& response, const ResponseContext& ctx);

// The JSON form of a tensor's data (flat, row-major): numbers, bools or strings.
nlohmann::json TensorDataToJson(const Tensor& tensor);


}  // namespace mmserve
