// The wire between the server and a model's worker process (`isolation: process`): frames on a
// Unix stream socket, each a 16-byte header — kind (u32), zero (u32), payload length (u64),
// little-endian — and its payload.
//
//   control socket   server → worker: kInit (the model's config, JSON)
//                    worker → server: kReady (signature and facts, JSON) or kFailed (a status)
//                    server → worker: kQuery (the tokenizer: /tokenize, /detokenize);
//                    worker → server: kReply, numbered as the query.
//                    The worker exits when the server closes it.
//   one per instance a batch session's: the socket carries nothing; the channel's shared region
//                    (shared_region.h) does, passing its turn both ways. server → worker:
//                    kBatch (one or more batches: each its tier and each request's inputs,
//                    outputs asked for and parameters); worker → server: kResults (per batch
//                    its status, then each request's outcome: a status, or its outputs and
//                    parameters; then the session's counters).
//                    A continuous session's (generation): frames on the socket, below.
//
// Every decoder treats its bytes as hostile (a worker that crashed mid-write, a bug): each
// length is bounded by what is left, each count by kMaxWireCount, each tensor validated; a
// malformed payload is an error, never a crash or an allocation beyond the payload's size.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/infer_request.h"
#include "common/histogram.h"
#include "common/result.h"

namespace mmserve {

enum class FrameKind : uint32_t {
  kInit = 1,
  kReady = 2,
  kFailed = 3,
  kBatch = 4,    // the payloads of a batch channel's shared region: no frame is of these kinds
  kResults = 5,
  // Continuous sessions (generation): the server admits sequences and cancels them; the worker
  // streams their pieces and their ends, each tagged with the sequence's number.
  kInstance = 6,  // worker → server, first on a channel: the instance's slots
  kAdmit = 7,     // server → worker: a sequence number, whether it streams, the request
  kCancel = 8,    // server → worker: a sequence number
  kPartial = 9,   // worker → server: a sequence number and a partial response
  kDone = 10,     // worker → server: a sequence number and its outcome
  kQuery = 11,    // server → worker, on the control socket: a TokenizerQuery (or a cache shed)
  kReply = 12,    // worker → server, on the control socket: a TokenizerReply
};

inline constexpr size_t kFrameHeaderBytes = 16;
// The largest payload either side accepts: a request body is at most 4 GiB (max_request_mb).
inline constexpr uint64_t kMaxFramePayload = uint64_t{8} << 30;
// The most elements of any list on the wire (requests, tensors, dimensions, parameters).
inline constexpr uint32_t kMaxWireCount = 1 << 20;

// Writes one frame, whole (retrying short writes and EINTR; never raises SIGPIPE). Unavailable
// when the peer has gone.
Status WriteFrame(int fd, FrameKind kind, std::string_view payload);
// Reads the frames of one socket. What arrives beyond a frame (a worker streaming tokens sends
// several at once) stays buffered for the next Read. One reader per socket and thread.
class FrameReader {
 public:
  // `spin`: Read() polls briefly before it blocks — for the side that waits for the answer to
  // a frame it just wrote (it usually comes within microseconds).
  explicit FrameReader(bool spin = true) : spin_(spin) {}
  // The next frame, its payload in `payload`; polls first when the reader spins. Unavailable on
  // end of stream or a reset (the peer has gone), InvalidArgument on a malformed header.
  Result<FrameKind> Read(int fd, std::string& payload);
  // Whether Read() would return at once: a frame is buffered, or bytes arrive (or the socket
  // fails) within `timeout`. Waits in a receive (the socket's SO_RCVTIMEO), taking what arrives
  // into the buffer: a frame costs no system call beyond the receive Read() would make.
  bool Ready(int fd, std::chrono::milliseconds timeout);

 private:
  Status Fill(int fd, size_t want, bool spin_first);
  void Compact(size_t total);
  std::optional<uint64_t> BufferedLength(Status* malformed) const;
  bool spin_ = true;
  std::chrono::milliseconds receive_timeout_{0};  // the SO_RCVTIMEO Ready() set; 0: none
  std::string buffer_;
  size_t begin_ = 0, end_ = 0;  // the bytes received and not yet read
};

// A status as a payload (kFailed), and back.
std::string EncodeStatus(const Status& status);
Status DecodeStatus(std::string_view payload);

// kBatch: one or more batches (up to kMaxBatchesPerCall, see Instance::ExecuteEach), each its
// tier and requests (inputs, requested outputs, parameters, id); written to `out`.
void EncodeBatches(std::span<const Execution> batches, std::string& out);
struct DecodedBatch {
  int tier = 0;
  std::vector<std::unique_ptr<InferRequest>> requests;
};
Result<std::vector<DecodedBatch>> DecodeBatches(std::string_view payload);

// What the engine in a worker says of itself, for stats and /metrics: its counters and its
// latency histograms (generation's time to first token), as the session reports them.
using Counters = std::map<std::string, int64_t>;
struct EngineStats {
  Counters counters;
  std::map<std::string, Histogram> histograms;
};

// kResults: per batch its Execute() status (`statuses[i]`) and each item's result; then the
// engine's stats after them.
void EncodeResults(std::span<const Execution> batches, std::span<const Status> statuses,
                   const EngineStats& stats, std::string& out);
// Fills each batch's results, `statuses` and `*stats`; an error when the payload is malformed
// or holds another number of batches or results than `batches`.
Status DecodeResults(std::string_view payload, std::span<Execution> batches,
                     std::span<Status> statuses, EngineStats* stats);

// kAdmit: sequence `seq` of a continuous session; `streaming` when its client takes partial
// responses. Its deadline and arrival travel as steady-clock times (one clock per host).
void EncodeAdmit(uint64_t seq, const InferRequest& request, std::string& out);
struct Admission {
  uint64_t seq = 0;
  bool streaming = false;
  std::unique_ptr<InferRequest> request;
};
Result<Admission> DecodeAdmit(std::string_view payload);
// kPartial (always a response) and kDone (a response or a status, and the engine's stats
// after it) of sequence `seq`.
void EncodeEvent(uint64_t seq, const Result<InferResponse>& result, const EngineStats& stats,
                 std::string& out);
Status DecodeEvent(std::string_view payload, uint64_t* seq, Result<InferResponse>* result,
                   EngineStats* stats);
// kQuery: the worker's session tokenizes a text or detokenizes token ids for the server.
struct TokenizerQuery {
  uint64_t id = 0;  // the server's number for it, which the reply repeats
  bool detokenize = false;
  std::string text;  // to tokenize
  bool add_special = false;
  bool pieces = false;
  std::vector<int32_t> tokens;  // to detokenize
  int64_t shed_bytes = 0;  // > 0: not the tokenizer but Session::ShedCache; the reply's text
                           // is the number of bytes shed
};
void EncodeQuery(const TokenizerQuery& query, std::string& out);
Result<TokenizerQuery> DecodeQuery(std::string_view payload);
// kReply: the query's number and its outcome — the tokens, the text, or why not.
struct TokenizerReply {
  uint64_t id = 0;
  Status status;
  std::vector<Session::Token> tokens;
  std::string text;
};
void EncodeReply(const TokenizerReply& reply, std::string& out);
Result<TokenizerReply> DecodeReply(std::string_view payload);

// kCancel and kInstance: one number.
std::string EncodeNumber(uint64_t n);
Result<uint64_t> DecodeNumber(std::string_view payload);

}  // namespace mmserve
