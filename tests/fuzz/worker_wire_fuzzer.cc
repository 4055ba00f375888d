// Fuzzes what a server reads from a model's worker process and a worker from its server
// (backend/process/): a worker that crashed mid-write or a bug must yield an error, never a
// crash. The first byte's low four bits pick the decoder, its high bits a number of requests;
// the rest is the payload.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "backend/process/worker_spec.h"
#include "backend/process/worker_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  mmserve::InferRequest request;
  std::vector<mmserve::BatchItem> items(data[0] >> 4, mmserve::BatchItem{&request});
  // Case 1: the items as one batch; case 10: each item a batch of its own.
  std::vector<mmserve::Execution> one(1), each(items.size());
  one[0].items = items;
  for (size_t i = 0; i < items.size(); ++i) each[i].items = std::span(items).subspan(i, 1);
  std::vector<mmserve::Status> statuses(items.size() + 1);
  mmserve::EngineStats stats;
  switch ((data[0] & 0xf) % 11) {
    case 0: (void)mmserve::DecodeBatches(payload); break;
    case 1: (void)mmserve::DecodeResults(payload, one, std::span(statuses).first(1), &stats); break;
    case 10:
      (void)mmserve::DecodeResults(payload, each, std::span(statuses).first(each.size()), &stats);
      break;
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
