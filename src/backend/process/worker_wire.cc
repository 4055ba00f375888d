#include "backend/process/worker_wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace mmserve {
namespace {

// Little-endian appends (every host mmserve builds on is little-endian; the copy is the
// encoding).
template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
void PutString(std::string& out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out.append(s);
}

// Bounds-checked reads over a payload; the first failure sticks, and every read after it
// yields zeros.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && in_.empty(); }

  template <typename T>
  T Get() {
    T value{};
    if (!Need(sizeof(T))) return value;
    std::memcpy(&value, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return value;
  }
  std::string_view GetString() {
    const uint64_t n = Get<uint64_t>();
    if (!Need(n)) return {};
    std::string_view s = in_.substr(0, n);
    in_.remove_prefix(n);
    return s;
  }
  // A list's length: at most kMaxWireCount, and at most one element per byte left (every
  // element takes at least one), so no count makes a reader reserve more than the payload.
  uint32_t GetCount() {
    const uint32_t n = Get<uint32_t>();
    if (n > kMaxWireCount || n > in_.size()) ok_ = false;
    return ok_ ? n : 0;
  }

 private:
  bool Need(uint64_t n) {
    if (!ok_ || n > in_.size()) ok_ = false;
    return ok_;
  }
  std::string_view in_;
  bool ok_ = true;
};

// How long FrameReader::Read polls before it blocks (measured: 0.53x of in-process throughput at 0 µs,
// 0.70x at 30, 0.65x at 100 — identity, 16 clients, docs/BENCHMARKS.md P10).
constexpr auto kSpinBeforeBlocking = std::chrono::microseconds(30);
constexpr size_t kFirstRead = 64 * 1024;  // one receive takes a whole frame, usually

Status Malformed(std::string_view what) {
  return InvalidArgument("malformed worker message: " + std::string(what));
}

void PutTensor(std::string& out, const Tensor& t) {
  PutString(out, t.name());
  Put<uint8_t>(out, static_cast<uint8_t>(t.type()));
  Put<uint32_t>(out, static_cast<uint32_t>(t.shape().size()));
  for (int64_t d : t.shape()) Put<int64_t>(out, d);
  PutString(out, t.data());
}
Result<Tensor> GetTensor(Reader& r) {
  std::string name(r.GetString());
  const uint8_t type = r.Get<uint8_t>();
  if (type > static_cast<uint8_t>(DataType::kBytes)) return Malformed("tensor datatype");
  Shape shape(r.GetCount());
  for (int64_t& d : shape) d = r.Get<int64_t>();
  std::string data(r.GetString());
  if (!r.ok()) return Malformed("tensor");
  Tensor t(std::move(name), static_cast<DataType>(type), std::move(shape), std::move(data));
  MMS_RETURN_IF_ERROR(t.Validate());
  return t;
}
void PutTensors(std::string& out, const std::vector<Tensor>& tensors) {
  Put<uint32_t>(out, static_cast<uint32_t>(tensors.size()));
  for (const Tensor& t : tensors) PutTensor(out, t);
}
Status GetTensors(Reader& r, std::vector<Tensor>& tensors) {
  const uint32_t n = r.GetCount();
  tensors.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    MMS_ASSIGN_OR_RETURN(Tensor t, GetTensor(r));
    tensors.push_back(std::move(t));
  }
  return r.ok() ? Status::Ok() : Malformed("tensor list");
}

enum ParamTag : uint8_t { kBool, kInt, kReal, kText };
void PutParams(std::string& out, const RequestParams& params) {
  Put<uint32_t>(out, static_cast<uint32_t>(params.size()));
  for (const auto& [key, value] : params) {
    PutString(out, key);
    Put<uint8_t>(out, static_cast<uint8_t>(value.index()));
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) {
            PutString(out, v);
          } else if constexpr (std::is_same_v<V, bool>) {
            Put<uint8_t>(out, v ? 1 : 0);
          } else {
            Put<V>(out, v);
          }
        },
        value);
  }
}
Status GetParams(Reader& r, RequestParams& params) {
  const uint32_t n = r.GetCount();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    std::string key(r.GetString());
    ParamValue value;
    switch (r.Get<uint8_t>()) {
      case kBool: value = r.Get<uint8_t>() != 0; break;
      case kInt: value = r.Get<int64_t>(); break;
      case kReal: value = r.Get<double>(); break;
      case kText: value = std::string(r.GetString()); break;
      default: return Malformed("parameter type");
    }
    params.insert_or_assign(std::move(key), std::move(value));
  }
  return r.ok() ? Status::Ok() : Malformed("parameters");
}

void PutStatus(std::string& out, const Status& s) {
  Put<uint8_t>(out, static_cast<uint8_t>(s.code()));
  PutString(out, s.message());
}
Status GetStatus(Reader& r) {
  const uint8_t code = r.Get<uint8_t>();
  std::string message(r.GetString());
  if (!r.ok()) return Malformed("status");
  if (code > static_cast<uint8_t>(StatusCode::kPermissionDenied)) return Malformed("status code");
  if (code == 0) return Status::Ok();
  return Status(static_cast<StatusCode>(code), std::move(message));
}

void PutStats(std::string& out, const EngineStats& stats) {
  Put<uint32_t>(out, static_cast<uint32_t>(stats.counters.size()));
  for (const auto& [name, value] : stats.counters) {
    PutString(out, name);
    Put<int64_t>(out, value);
  }
  Put<uint32_t>(out, static_cast<uint32_t>(stats.histograms.size()));
  for (const auto& [name, h] : stats.histograms) {
    PutString(out, name);
    for (int64_t c : h.counts) Put<int64_t>(out, c);
    Put<int64_t>(out, h.count);
    Put<int64_t>(out, h.sum_ns);
  }
}
void GetStats(Reader& r, EngineStats& stats) {
  stats.counters.clear();
  stats.histograms.clear();
  uint32_t n = r.GetCount();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    std::string name(r.GetString());
    stats.counters[std::move(name)] = r.Get<int64_t>();
  }
  n = r.GetCount();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    std::string name(r.GetString());
    Histogram h;
    for (int64_t& c : h.counts) c = r.Get<int64_t>();
    h.count = r.Get<int64_t>();
    h.sum_ns = r.Get<int64_t>();
    if (r.ok()) stats.histograms[std::move(name)] = h;
  }
}

void PutRequest(std::string& out, const InferRequest& q) {
  PutString(out, q.id);
  PutTensors(out, q.inputs);
  Put<uint32_t>(out, static_cast<uint32_t>(q.requested_outputs.size()));
  for (const auto& name : q.requested_outputs) PutString(out, name);
  PutParams(out, q.parameters);
}
Result<std::unique_ptr<InferRequest>> GetRequest(Reader& r) {
  auto q = std::make_unique<InferRequest>();
  q->id = std::string(r.GetString());
  MMS_RETURN_IF_ERROR(GetTensors(r, q->inputs));
  const uint32_t outputs = r.GetCount();
  for (uint32_t o = 0; o < outputs && r.ok(); ++o) q->requested_outputs.emplace_back(r.GetString());
  MMS_RETURN_IF_ERROR(GetParams(r, q->parameters));
  return q;
}

void PutResult(std::string& out, const Result<InferResponse>& result) {
  if (!result.ok()) return PutStatus(out, result.status());
  PutStatus(out, Status::Ok());
  PutTensors(out, result->outputs);
  PutParams(out, result->parameters);
}
Status GetResult(Reader& r, Result<InferResponse>& result) {
  Status s = GetStatus(r);
  if (!r.ok()) return Malformed("result status");
  if (!s.ok()) {
    result = std::move(s);
    return Status::Ok();
  }
  InferResponse response;
  MMS_RETURN_IF_ERROR(GetTensors(r, response.outputs));
  MMS_RETURN_IF_ERROR(GetParams(r, response.parameters));
  result = std::move(response);
  return Status::Ok();
}

}  // namespace

Status WriteFrame(int fd, FrameKind kind, std::string_view payload) {
  char header[kFrameHeaderBytes];
  const uint32_t words[2] = {static_cast<uint32_t>(kind), 0};
  const uint64_t length = payload.size();
  std::memcpy(header, words, sizeof(words));
  std::memcpy(header + sizeof(words), &length, sizeof(length));
  // Header and payload in one call: a frame is one syscall, usually.
  iovec parts[2] = {{header, sizeof(header)},
                    {const_cast<char*>(payload.data()), payload.size()}};
  msghdr msg{};
  msg.msg_iov = parts;
  msg.msg_iovlen = 2;
  while (msg.msg_iovlen > 0) {
    const ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return Unavailable(std::string("worker socket: ") + std::strerror(errno));
    size_t left = static_cast<size_t>(sent);
    while (msg.msg_iovlen > 0 && left >= msg.msg_iov[0].iov_len) {
      left -= msg.msg_iov[0].iov_len;
      ++msg.msg_iov;
      --msg.msg_iovlen;
    }
    if (msg.msg_iovlen > 0) {
      msg.msg_iov[0].iov_base = static_cast<char*>(msg.msg_iov[0].iov_base) + left;
      msg.msg_iov[0].iov_len -= left;
    }
  }
  return Status::Ok();
}

Status FrameReader::Fill(int fd, size_t want, bool spin_first) {
  const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeBlocking;
  while (end_ - begin_ < want) {
    const bool spin = spin_first && std::chrono::steady_clock::now() < spin_until;
    const ssize_t n =
        ::recv(fd, buffer_.data() + end_, buffer_.size() - end_, spin ? MSG_DONTWAIT : 0);
    // EAGAIN: a spin found nothing yet, or Ready() left a receive timeout on the socket.
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n == 0) return Unavailable("worker socket: closed by the peer");
    if (n < 0) return Unavailable(std::string("worker socket: ") + std::strerror(errno));
    end_ += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Moves what is buffered to the front and makes room for `total` bytes of it.
void FrameReader::Compact(size_t total) {
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() < std::max(total, kFirstRead)) buffer_.resize(std::max(total, kFirstRead));
}

std::optional<uint64_t> FrameReader::BufferedLength(Status* malformed) const {
  if (end_ - begin_ < kFrameHeaderBytes) return std::nullopt;
  Reader r(std::string_view(buffer_.data() + begin_, kFrameHeaderBytes));
  const uint32_t kind = r.Get<uint32_t>();
  const uint32_t zero = r.Get<uint32_t>();
  const uint64_t length = r.Get<uint64_t>();
  if (kind < static_cast<uint32_t>(FrameKind::kInit) ||
      kind > static_cast<uint32_t>(FrameKind::kReply) || zero != 0) {
    *malformed = Malformed("frame header");
  } else if (length > kMaxFramePayload) {
    *malformed = Malformed("frame longer than 8 GiB");
  }
  return length;
}

Result<FrameKind> FrameReader::Read(int fd, std::string& payload) {
  if (end_ - begin_ < kFrameHeaderBytes) {
    Compact(kFrameHeaderBytes);
    MMS_RETURN_IF_ERROR(Fill(fd, kFrameHeaderBytes, /*spin_first=*/spin_));
  }
  Status malformed;
  const uint64_t length = *BufferedLength(&malformed);
  MMS_RETURN_IF_ERROR(malformed);
  const size_t total = kFrameHeaderBytes + static_cast<size_t>(length);
  if (buffer_.size() - begin_ < total) Compact(total);
  MMS_RETURN_IF_ERROR(Fill(fd, total, /*spin_first=*/false));
  uint32_t kind = 0;
  std::memcpy(&kind, buffer_.data() + begin_, sizeof(kind));
  payload.assign(buffer_.data() + begin_ + kFrameHeaderBytes, static_cast<size_t>(length));
  begin_ += total;
  if (begin_ == end_) begin_ = end_ = 0;
  return static_cast<FrameKind>(kind);
}

bool FrameReader::Ready(int fd, std::chrono::milliseconds timeout) {
  Status malformed;
  if (auto length = BufferedLength(&malformed);
      length && (!malformed.ok() || end_ - begin_ >= kFrameHeaderBytes + *length)) {
    return true;
  }
  // One receive that waits at most `timeout` (the socket's receive timeout, set when it
  // changes): what arrives is taken into the buffer, so a frame costs the receive Read() would
  // have made and nothing besides — no poll before it.
  const bool wait = timeout.count() > 0;
  if (wait && timeout != receive_timeout_) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
    const timeval tv{.tv_sec = static_cast<time_t>(us / 1'000'000),
                     .tv_usec = static_cast<suseconds_t>(us % 1'000'000)};
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
      pollfd p{fd, POLLIN, 0};  // cannot time the receive: wait for it instead
      return ::poll(&p, 1, static_cast<int>(timeout.count())) != 0;
    }
    receive_timeout_ = timeout;
  }
  Compact(kFrameHeaderBytes);
  ssize_t n;
  do {
    n = ::recv(fd, buffer_.data() + end_, buffer_.size() - end_, wait ? 0 : MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    end_ += static_cast<size_t>(n);
    return true;  // a frame, or its start: Read() waits for the rest
  }
  return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);  // a hang-up or error: Read() says
}

std::string EncodeStatus(const Status& status) {
  std::string out;
  PutStatus(out, status);
  return out;
}

Status DecodeStatus(std::string_view payload) {
  Reader r(payload);
  Status s = GetStatus(r);
  if (r.ok() && !r.done()) return Malformed("bytes after the status");
  return s;
}

void EncodeBatches(std::span<const Execution> batches, std::string& out) {
  out.clear();
  Put<uint32_t>(out, static_cast<uint32_t>(batches.size()));
  for (const Execution& batch : batches) {
    Put<int32_t>(out, batch.tier);
    Put<uint32_t>(out, static_cast<uint32_t>(batch.items.size()));
    for (const BatchItem& item : batch.items) PutRequest(out, *item.request);
  }
}

Result<std::vector<DecodedBatch>> DecodeBatches(std::string_view payload) {
  Reader r(payload);
  const uint32_t count = r.GetCount();
  if (!r.ok() || count == 0 || count > static_cast<uint32_t>(kMaxBatchesPerCall)) return Malformed("batches header");
  std::vector<DecodedBatch> batches(count);
  for (DecodedBatch& batch : batches) {
    batch.tier = r.Get<int32_t>();
    const uint32_t n = r.GetCount();
    if (!r.ok() || n == 0 || batch.tier < 0) return Malformed("batch header");
    for (uint32_t i = 0; i < n; ++i) {
      MMS_ASSIGN_OR_RETURN(auto q, GetRequest(r));
      batch.requests.push_back(std::move(q));
    }
  }
  if (!r.done()) return Malformed("batch");
  return batches;
}

void EncodeResults(std::span<const Execution> batches, std::span<const Status> statuses,
                   const EngineStats& stats, std::string& out) {
  out.clear();
  Put<uint32_t>(out, static_cast<uint32_t>(batches.size()));
  for (size_t b = 0; b < batches.size(); ++b) {
    PutStatus(out, statuses[b]);
    Put<uint32_t>(out, static_cast<uint32_t>(batches[b].items.size()));
    for (const BatchItem& item : batches[b].items) PutResult(out, item.result);
  }
  PutStats(out, stats);
}

Status DecodeResults(std::string_view payload, std::span<Execution> batches,
                     std::span<Status> statuses, EngineStats* stats) {
  Reader r(payload);
  const uint32_t count = r.GetCount();
  if (!r.ok() || count != batches.size() || statuses.size() != batches.size()) {
    return Malformed("results header");
  }
  for (size_t b = 0; b < batches.size(); ++b) {
    statuses[b] = GetStatus(r);
    const uint32_t n = r.GetCount();
    if (!r.ok() || n != batches[b].items.size()) return Malformed("results of a batch");
    for (BatchItem& item : batches[b].items) MMS_RETURN_IF_ERROR(GetResult(r, item.result));
  }
  GetStats(r, *stats);
  if (!r.done()) return Malformed("results");
  return Status::Ok();
}

void EncodeAdmit(uint64_t seq, const InferRequest& request, std::string& out) {
  out.clear();
  Put<uint64_t>(out, seq);
  Put<uint8_t>(out, request.on_partial ? 1 : 0);
  Put<int64_t>(out, request.deadline.time_since_epoch().count());
  Put<int64_t>(out, request.arrival.time_since_epoch().count());
  PutRequest(out, request);
}

Result<Admission> DecodeAdmit(std::string_view payload) {
  Reader r(payload);
  Admission a;
  a.seq = r.Get<uint64_t>();
  a.streaming = r.Get<uint8_t>() != 0;
  const auto deadline = Clock::duration(r.Get<int64_t>());
  const auto arrival = Clock::duration(r.Get<int64_t>());
  if (!r.ok()) return Malformed("admission header");
  MMS_ASSIGN_OR_RETURN(a.request, GetRequest(r));
  a.request->deadline = Clock::time_point(deadline);
  a.request->arrival = Clock::time_point(arrival);
  if (!r.done()) return Malformed("admission");
  return a;
}

void EncodeEvent(uint64_t seq, const Result<InferResponse>& result, const EngineStats& stats,
                 std::string& out) {
  out.clear();
  Put<uint64_t>(out, seq);
  PutResult(out, result);
  PutStats(out, stats);
}

Status DecodeEvent(std::string_view payload, uint64_t* seq, Result<InferResponse>* result,
                   EngineStats* stats) {
  Reader r(payload);
  *seq = r.Get<uint64_t>();
  MMS_RETURN_IF_ERROR(GetResult(r, *result));
  GetStats(r, *stats);
  return r.done() ? Status::Ok() : Malformed("event");
}

void EncodeQuery(const TokenizerQuery& query, std::string& out) {
  out.clear();
  Put<uint64_t>(out, query.id);
  Put<uint8_t>(out, query.shed_bytes > 0 ? 2 : query.detokenize ? 1 : 0);
  if (query.shed_bytes > 0) {
    Put<int64_t>(out, query.shed_bytes);
  } else if (query.detokenize) {
    Put<uint32_t>(out, static_cast<uint32_t>(query.tokens.size()));
    for (int32_t t : query.tokens) Put<int32_t>(out, t);
  } else {
    Put<uint8_t>(out, query.add_special);
    Put<uint8_t>(out, query.pieces);
    PutString(out, query.text);
  }
}

Result<TokenizerQuery> DecodeQuery(std::string_view payload) {
  Reader r(payload);
  TokenizerQuery q;
  q.id = r.Get<uint64_t>();
  const auto op = r.Get<uint8_t>();
  q.detokenize = op == 1;
  if (op == 2) {
    q.shed_bytes = r.Get<int64_t>();
    if (q.shed_bytes <= 0) return Malformed("tokenizer query");
  } else if (op > 2) {
    return Malformed("tokenizer query");
  } else if (q.detokenize) {
    q.tokens.resize(r.GetCount());
    for (int32_t& t : q.tokens) t = r.Get<int32_t>();
  } else {
    q.add_special = r.Get<uint8_t>() != 0;
    q.pieces = r.Get<uint8_t>() != 0;
    q.text = std::string(r.GetString());
  }
  if (!r.done()) return Malformed("tokenizer query");
  return q;
}

void EncodeReply(const TokenizerReply& reply, std::string& out) {
  out.clear();
  Put<uint64_t>(out, reply.id);
  PutStatus(out, reply.status);
  Put<uint32_t>(out, static_cast<uint32_t>(reply.tokens.size()));
  for (const auto& t : reply.tokens) {
    Put<int32_t>(out, t.id);
    PutString(out, t.piece);
  }
  PutString(out, reply.text);
}

Result<TokenizerReply> DecodeReply(std::string_view payload) {
  Reader r(payload);
  TokenizerReply reply;
  reply.id = r.Get<uint64_t>();
  reply.status = GetStatus(r);
  reply.tokens.resize(r.GetCount());
  for (auto& t : reply.tokens) {
    t.id = r.Get<int32_t>();
    t.piece = std::string(r.GetString());
  }
  reply.text = std::string(r.GetString());
  if (!r.done()) return Malformed("tokenizer reply");
  return reply;
}

std::string EncodeNumber(uint64_t n) {
  std::string out;
  Put<uint64_t>(out, n);
  return out;
}

Result<uint64_t> DecodeNumber(std::string_view payload) {
  Reader r(payload);
  const uint64_t n = r.Get<uint64_t>();
  if (!r.done()) return Malformed("number");
  return n;
}

}  // namespace mmserve
