// Fuzzes what a server reads from a model's worker process and a worker from its server
// (backend/process/): a worker that crashed mid-write or a bug must yield an error, never a
// crash. The first byte's low four bits pick the decoder, its high bits a batch size; the rest
// is the payload.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backend/process/worker_spec.h"
#include "backend/process/worker_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  mmserve::InferRequest request;
  std::vector<mmserve::BatchItem> items(data[0] >> 4, mmserve::BatchItem{&request});
  mmserve::Status batch;
  mmserve::EngineStats stats;
  switch ((data[0] & 0xf) % 10) {
    case 0: (void)mmserve::DecodeBatch(payload); break;
    case 1: (void)mmserve::DecodeResults(payload, items, &batch, &stats); break;
    case 2: (void)mmserve::DecodeStatus(payload); break;
    case 3: (void)mmserve::DecodeWorkerSpec(payload); break;
    case 4: (void)mmserve::DecodeWorkerFacts(payload); break;
    case 5: (void)mmserve::DecodeAdmit(payload); break;
    case 6: {
      uint64_t seq = 0;
      mmserve::Result<mmserve::InferResponse> result = mmserve::InferResponse{};
      (void)mmserve::DecodeEvent(payload, &seq, &result, &stats);
      break;
    }
    case 7: (void)mmserve::DecodeQuery(payload); break;
    case 8: (void)mmserve::DecodeReply(payload); break;
    default: (void)mmserve::DecodeNumber(payload); break;
  }
  return 0;
}
