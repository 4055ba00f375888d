// JsonCodec: KServe v2 REST bodies ↔ InferRequest / InferResponse, including the binary tensor
// extension (Inference-Header-Content-Length). This is the hot path of every REST inference, so
// requests are parsed with simdjson (no tree of allocated nodes) and responses written directly;
// every malformed field becomes an InvalidArgument status that names it.
#pragma once

#include <optional>
#include <string>

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
// Tensor data is written flat, row-major; floating-point values in the shortest form that reads
// back as the same value of the tensor's type (FP32 0.1 as 0.1).
EncodedResponse EncodeInferResponse(const InferResponse& response, const ResponseContext& ctx);

}  // namespace mmserve
