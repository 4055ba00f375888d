// The wire between the server and a model's worker process (`isolation: process`): frames on a
// Unix stream socket, each a 16-byte header — kind (u32), zero (u32), payload length (u64),
// little-endian — and its payload.
//
//   control socket   server → worker: kInit (the model's config, JSON)
//                    worker → server: kReady (signature and facts, JSON) or kFailed (a status)
//                    The worker exits when the server closes it.
//   one per instance server → worker: kBatch (the tier and each request's inputs, outputs asked
//                    for and parameters); worker → server: kResults (the batch's status, then
//                    each request's outcome: a status, or its outputs and parameters; then
//                    the session's counters).
//
// Every decoder treats its bytes as hostile (a worker that crashed mid-write, a bug): each
// length is bounded by what is left, each count by kMaxWireCount, each tensor validated; a
// malformed payload is an error, never a crash or an allocation beyond the payload's size.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/infer_request.h"
#include "common/result.h"

namespace mmserve {

enum class FrameKind : uint32_t {
  kInit = 1,
  kReady = 2,
  kFailed = 3,
  kBatch = 4,
  kResults = 5,
};

inline constexpr size_t kFrameHeaderBytes = 16;
// The largest payload either side accepts: a request body is at most 4 GiB (max_request_mb).
inline constexpr uint64_t kMaxFramePayload = uint64_t{8} << 30;
// The most elements of any list on the wire (requests, tensors, dimensions, parameters).
inline constexpr uint32_t kMaxWireCount = 1 << 20;

// Writes one frame, whole (retrying short writes and EINTR; never raises SIGPIPE). Unavailable
// when the peer has gone.
Status WriteFrame(int fd, FrameKind kind, std::string_view payload);
// Reads one frame into `payload` (its capacity reused). Unavailable on end of stream or a reset
// (the peer has gone), InvalidArgument on a malformed header.
Result<FrameKind> ReadFrame(int fd, std::string& payload);

// A status as a payload (kFailed), and back.
std::string EncodeStatus(const Status& status);
Status DecodeStatus(std::string_view payload);

// kBatch: the batch's tier and requests (inputs, requested outputs, parameters, id), appended to
// `out` (cleared first).
void EncodeBatch(int tier, BatchView items, std::string& out);
struct DecodedBatch {
  int tier = 0;
  std::vector<std::unique_ptr<InferRequest>> requests;
};
Result<DecodedBatch> DecodeBatch(std::string_view payload);

// kResults: `batch` (the Execute() status), each item's result, and the session's counters
// after it (for stats and /metrics).
using Counters = std::map<std::string, int64_t>;
void EncodeResults(const Status& batch, BatchView items, const Counters& counters,
                   std::string& out);
// Fills each of `items`' results, `*batch` with the batch's status and `*counters`; an error
// when the payload is malformed or holds another number of results than `items`.
Status DecodeResults(std::string_view payload, BatchView items, Status* batch,
                     Counters* counters);

}  // namespace mmserve
