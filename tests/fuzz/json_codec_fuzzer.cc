// Fuzzes the KServe v2 REST codec: JSON infer bodies, the binary tensor extension (the first
// input byte picks a header length) and the response encoder on whatever parsed.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "server/http/json_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Byte 0: 0 = plain JSON; otherwise the JSON header is the first (byte0 * 8) bytes of the rest.
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::optional<size_t> header;
  if (data[0] != 0) header = std::min<size_t>(body.size(), size_t{data[0]} * 8);
  auto parsed = mmserve::ParseInferRequest(body, header);
  if (!parsed.ok()) return 0;
  mmserve::InferResponse response;
  response.outputs = parsed->request.inputs;  // echo, as the identity backend does
  response.parameters = parsed->request.parameters;
  (void)mmserve::EncodeInferResponse(response, parsed->response);
  return 0;
}
