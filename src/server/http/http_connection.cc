#include "server/http/http_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <deque>
#include <string_view>
#include <utility>

#include "backend/infer_request.h"
#include "common/logging.h"

namespace mmserve {
namespace {

namespace http = beast::http;
using tcp = net::ip::tcp;
using TcpStream = beast::basic_stream<tcp, Strand>;
using Timer = net::steady_timer::rebind_executor<Strand>::other;

// Reading a request, a connection is closed when it
//  - sends no byte of its next request for kIdleTimeout (keep-alive),
//  - has begun a header but not completed it within kHeaderTimeout (slowloris),
//  - has not completed the body within kIdleTimeout of its header.
// Over global.max_connections: kRefusedFirstByte (clients send as they connect; from the listen
// backlog, they have) and kRefusedTick, then kRefusedTimeout for the rest and the drain after the
// 503. A timer checks the deadlines every kTick while a request is read: a header's falls between
// kHeaderTimeout and kHeaderTimeout + kTick after its first byte.
constexpr auto kIdleTimeout = std::chrono::seconds(60);
constexpr auto kHeaderTimeout = std::chrono::seconds(10);
constexpr auto kTick = std::chrono::seconds(5);
constexpr auto kRefusedFirstByte = std::chrono::milliseconds(250), kRefusedTick = kRefusedFirstByte;
constexpr auto kRefusedTimeout = std::chrono::seconds(2);
// The interim answer that asks for an expected body, and that probes a half-closed connection.
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// Read in pieces this large: a typical request in one recvmsg rather than 512-byte bites.
constexpr size_t kReadBufferBytes = 16 * 1024;
// After refusing a request (413, malformed), read and discard at most this much of what the
// client is still sending before closing, so that it can read the refusal instead of a reset.
constexpr size_t kMaxDrainBytes = 256u << 20;
constexpr auto kDrainTimeout = std::chrono::seconds(10);
// A body up to this size is routed (and its JSON parsed) on the I/O thread that read it: under
// a millisecond for any JSON. A larger one goes to the body threads (FrontendShared).
constexpr size_t kInlineBodyBytes = 16 * 1024;

// 503 (with Retry-After): the server is at a limit; the client should come back shortly.
HttpResponse Overloaded(const std::string& why) {
  return ForRequest(ErrorResponse(Unavailable(why)), 11, false);
}

class Connection;
// The connection whose answer this thread is writing (Connection::AnswerHere), if any.
thread_local Connection* t_answering = nullptr;

// One client connection: read a request, hand it to the router, write its response, repeat.
// All of its handlers run on its strand, with one exception: a model's worker that would go
// idle otherwise writes the answer of the request it just executed itself (AnswerHere), which
// saves waking an I/O thread before the client has its answer.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `refuse`: the server has too many connections; this one answers its first request 503.
  Connection(Socket socket, FrontendShared& shared, bool refuse)
      : stream_(std::move(socket)),
        idle_timer_(stream_.get_executor()),
        shared_(shared),
        refuse_(refuse) {
    ++shared_.connections;
    buffer_.reserve(kReadBufferBytes);
  }
  ~Connection() { shared_.ConnectionClosed(); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Read(); });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(shared_.max_body_bytes);
    awaiting_request_ = true;
    phase_ = ReadPhase::kIdle;
    phase_started_ = std::chrono::steady_clock::now();
    ArmReadTimer();
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec || parser_->is_done()) return OnRead(ec);
    const auto& req = parser_->get();
    auto expect = req.find(http::field::expect);
    if (expect != req.end() && req.version() >= 11 &&
        beast::iequals(expect->value(), "100-continue")) {
      // The client waits for this before it sends the body (a body over the limit was already
      // refused with the header: Content-Length is checked against body_limit there).
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    phase_ = ReadPhase::kBody;
    phase_started_ = std::chrono::steady_clock::now();
    // Usually the body came with the header: parse it here instead of through another
    // asynchronous operation (whose completion would be posted).
    parser_->eager(true);
    while (!parser_->is_done() && buffer_.size() > 0) {
      beast::error_code ec;
      const size_t n = parser_->put(buffer_.data(), ec);
      buffer_.consume(n);
      if (ec == http::error::need_more) break;
      if (ec) return OnRead(ec);
      if (n == 0) break;
    }
    if (parser_->is_done()) return OnRead({});
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRead(ec);
                     });
  }

  // The read deadlines (see kIdleTimeout), checked every kTick while a request is read. The
  // timer is armed at most once: a request read in time costs no timer operation.
  void ArmReadTimer() {
    if (read_timer_armed_) return;
    read_timer_armed_ = true;
    idle_timer_.expires_after(refuse_ ? kRefusedTick : kTick);
    idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      self->read_timer_armed_ = false;
      if (ec || !self->awaiting_request_) return;  // cancelled, or busy with a request
      self->CheckReadDeadline();
    });
  }

  void CheckReadDeadline() {
    const auto now = std::chrono::steady_clock::now();
    if (phase_ == ReadPhase::kIdle && (buffer_.size() > 0 || parser_->got_some())) {
      phase_ = ReadPhase::kHeader;  // its first byte came since the last tick
      phase_started_ = now;
    }
    std::chrono::milliseconds limit = phase_ == ReadPhase::kHeader ? kHeaderTimeout : kIdleTimeout;
    if (refuse_) limit = phase_ == ReadPhase::kIdle ? kRefusedFirstByte : kRefusedTimeout;
    if (now - phase_started_ >= limit) return Close();
    ArmReadTimer();
  }

  void OnRead(beast::error_code ec) {
    awaiting_request_ = false;
    if (ec == http::error::end_of_stream || ec == net::error::operation_aborted ||
        ec == beast::error::timeout || ec == net::error::connection_reset) {
      return Close();
    }
    shared_.in_progress.Begin();
    const int64_t handling = ++shared_.handling;
    if (ec == http::error::body_limit) {
      const Status too_big = ResourceExhausted("request body exceeds the limit of " +
                                               std::to_string(shared_.max_body_bytes) +
                                               " bytes (global.max_request_mb)");
      return Write(ForRequest(ErrorResponse(too_big), 11, false), http::status::payload_too_large);
    }
    if (ec) {
      return Write(ForRequest(
          ErrorResponse(InvalidArgument("malformed HTTP request: " + ec.message())), 11, false));
    }
    origin_.clear();
    if (auto it = parser_->get().find(http::field::origin); it != parser_->get().end()) {
      origin_ = std::string(it->value());
    }
    const bool probe = RequestPolicy::IsHealthProbe(parser_->get());
    if (refuse_ && !probe) {
      shared_.refused_connections++;
      return Write(Overloaded("too many connections (global.max_connections is " +
                              std::to_string(shared_.max_connections) + ")"));
    }
    if (shared_.max_in_flight > 0 && handling > shared_.max_in_flight && !probe) {
      shared_.refused_requests++;
      HttpResponse res = Overloaded("too many requests in progress (global.max_in_flight is " +
                                    std::to_string(shared_.max_in_flight) + ")");
      res.keep_alive(parser_->get().keep_alive());
      return Write(std::move(res));
    }
    auto refusal = probe ? std::nullopt : shared_.policy.Refusal(parser_->get());
    if (refusal) return Write(std::move(*refusal));
    if (parser_->get().method() == http::verb::options &&
        parser_->get().find(http::field::access_control_request_method) != parser_->get().end()) {
      return Write(shared_.policy.Preflight(parser_->get()));
    }
    const uint64_t request = ++requests_;
    // Published with the release: a thread that claims the answer sees this request's state.
    answer_state_.store(kPending, std::memory_order_release);
    request_version_ = parser_->get().version();
    request_keep_alive_ = parser_->get().keep_alive();
    auto [request_id, route] = AccessFields(parser_->get());
    request_bytes_ = parser_->get().body().size();
    if (request_bytes_ <= kInlineBodyBytes) {
      Route(parser_->release(), request, std::move(request_id), std::move(route));
      if (poisoned_) return;
    } else {
      // A large body is parsed on the body threads: however long its JSON takes, the I/O
      // threads stay free for other connections and for health probes.
      net::post(*shared_.body_pool, [self = shared_from_this(), req = parser_->release(), request,
                                    request_id = std::move(request_id),
                                    route = std::move(route)]() mutable {
        self->Route(std::move(req), request, std::move(request_id), std::move(route));
      });
    }
    // An answer already on its way (an inline execution) has no client to watch for.
    if (responded_ != request) WatchForHangUp(request);
  }

  // Hands request number `request` to the router. On the strand, or on a body thread.
  void Route(HttpRequest req, uint64_t request, std::string request_id, std::string route) {
    auto self = shared_from_this();
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    try {
      shared_.router.Handle(
          std::move(req),
          [self, version, keep_alive](HttpResponse res) {
            res = ForRequest(std::move(res), version, keep_alive);
            if (t_answering == self.get()) return self->WriteHere(std::move(res));
            net::dispatch(self->stream_.get_executor(), [self, res = std::move(res)]() mutable {
              if (!self->poisoned_) self->Write(std::move(res));
            });
          },
          ForRouter(std::move(request_id), std::move(route)));
    } catch (const std::exception& e) {
      // The last line of defence (the causes are fixed where they arise).
      spdlog::error("http: unexpected exception handling a request: {}", e.what());
      net::dispatch(stream_.get_executor(), [self, request, what = std::string(e.what())] {
        self->Poison(request, what);
      });
    }
  }

  // A handler threw: answer 500 and close, and drop any answer the request still produces, so
  // that none arrives out of turn. Strand only.
  void Poison(uint64_t request, const std::string& what) {
    int pending = kPending;  // unless a worker writes the answer already
    if (responded_ != request &&
        answer_state_.compare_exchange_strong(pending, kOpen, std::memory_order_acquire)) {
      Write(ForRequest(ErrorResponse(Internal("unexpected error: " + what)), request_version_,
                       false));
    }
    poisoned_ = true;
  }

  // What the router may know of this connection while the answer is pending.
  HttpConnection ForRouter(std::string request_id, std::string route) {
    auto self = shared_from_this();
    return HttpConnection{
        .dispatch =
            [self](std::function<void()> task) {
              net::dispatch(self->stream_.get_executor(), std::move(task));
            },
        .answer = [self](std::function<void()> task) { self->AnswerHere(std::move(task)); },
        .open_stream = [self]() -> std::shared_ptr<HttpStream> {
          // A streamed answer is written on the strand only, piece by piece.
          self->answer_state_.store(kOpen, std::memory_order_relaxed);
          return std::make_shared<Stream>(self);
        },
        .client_gone = [self] { return self->broken_.load(); },
        .request_id = std::move(request_id),
        .route = std::move(route)};
  }

  // For the access log: the client's X-Request-Id (cut to 128 bytes) and "METHOD /path"
  // (without the query, cut to 256 bytes).
  static std::pair<std::string, std::string> AccessFields(const HttpRequest& req) {
    std::string request_id;
    if (auto it = req.find("x-request-id"); it != req.end()) {
      request_id = std::string(it->value().substr(0, 128));
    }
    const std::string target(req.target().data(), req.target().size());
    return {std::move(request_id), std::string(req.method_string()) + " " +
                                       target.substr(0, std::min(target.find('?'), size_t{256}))};
  }

  // While request `request` is pending, notices the client closing the connection and marks it
  // broken, so that its work can be cancelled. A pipelined next request makes the socket
  // readable too; that is not a hang-up. Nor is a half-close (shutdown(SHUT_WR) after the
  // request: the client still reads): both look alike from here, an end of stream, so on
  // HTTP/1.1 the end of stream is answered with an interim "100 Continue", which every
  // HTTP/1.1 client must accept before a final response. A client still reading takes it; a
  // closed socket answers it with a reset, and only that marks the request abandoned.
  void WatchForHangUp(uint64_t request) {
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this(), request](beast::error_code ec) {
          if (ec || request != self->requests_ || self->responded_ == request) return;
          // The probe may write; a worker writing the answer already makes it needless.
          int pending = kPending;
          if (!self->answer_state_.compare_exchange_strong(pending, kClaimed,
                                                           std::memory_order_acquire)) {
            return;
          }
          const bool probed = self->ProbeHangUp();
          self->answer_state_.store(kPending, std::memory_order_release);
          if (!probed) return;
          self->stream_.socket().async_wait(
              tcp::socket::wait_error, [self, request](beast::error_code ec) {
                if (ec || request != self->requests_ || self->responded_ == request) return;
                int error = 0;
                socklen_t len = sizeof error;
                ::getsockopt(self->stream_.socket().native_handle(), SOL_SOCKET, SO_ERROR, &error,
                             &len);
                if (error != 0) self->broken_ = true;
              });
        });
  }

  // The readable socket of a connection whose answer is pending: a pipelined request, a reset
  // (broken_) or an end of stream, which is probed with the interim answer. True when probed.
  bool ProbeHangUp() {
    char byte;
    const int fd = stream_.socket().native_handle();
    const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;  // a pipelined request: the client is there
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n < 0) {
      broken_ = true;  // reset
      return false;
    }
    if (buffer_.size() > 0) return false;    // pipelined requests read ahead: still there
    if (request_version_ < 11) return false;  // no interim answers in HTTP/1.0
    // Written directly: nothing else is being written (the answer has not started), and the
    // socket's send buffer is empty, so the 25 bytes go at once and in order.
    if (::send(fd, kContinue.data(), kContinue.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      broken_ = true;
      return false;
    }
    return true;
  }

  // The chunked-response side of a connection (server-sent events). Every method runs on the
  // connection's strand; chunks are written one at a time, in order.
  class Stream final : public HttpStream {
   public:
    explicit Stream(std::shared_ptr<Connection> c) : c_(std::move(c)) {}
    void Start(HttpResponse headers) override { c_->StreamStart(std::move(headers)); }
    void Send(std::string chunk) override { c_->StreamSend(std::move(chunk)); }
    void End() override { c_->StreamEnd(); }
    bool broken() const override { return c_->broken_.load(); }

   private:
    std::shared_ptr<Connection> c_;
  };

  void StreamStart(HttpResponse headers) {
    responded_ = requests_;
    headers = ForRequest(std::move(headers), request_version_, request_keep_alive_);
    if (shared_.draining) headers.keep_alive(false);
    stream_keep_alive_ = headers.keep_alive();
    header_.emplace(headers.result(), headers.version());
    for (const auto& field : headers) header_->set(field.name_string(), field.value());
    shared_.policy.AddCorsHeaders(origin_, header_->base());
    // HTTP/1.0 has no chunked encoding: the body is the events as they come, ended by closing.
    stream_chunked_ = header_->version() >= 11;
    if (!stream_chunked_) stream_keep_alive_ = false;
    header_->keep_alive(stream_keep_alive_);
    header_->chunked(stream_chunked_);
    serializer_.emplace(*header_);
    writing_ = true;
    http::async_write_header(stream_, *serializer_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->writing_ = false;
                               if (ec) self->broken_ = true;
                               self->Pump();
                             });
  }

  void StreamSend(std::string chunk) {
    if (!broken_) out_.push_back(std::move(chunk));
    Pump();
  }

  void StreamEnd() {
    --shared_.handling;  // the answer is complete; only its last chunk is left to write
    ending_ = true;
    Pump();
  }

  void Pump() {
    if (writing_) return;
    auto self = shared_from_this();
    if (broken_) {
      out_.clear();
      if (ending_) EndStream(true);
      return;
    }
    if (!out_.empty()) {
      auto data = std::make_shared<std::string>(std::move(out_.front()));
      out_.pop_front();
      writing_ = true;
      auto written = [self, data](beast::error_code ec, size_t) {
        self->writing_ = false;
        if (ec) self->broken_ = true;
        self->Pump();
      };
      if (stream_chunked_) {
        net::async_write(stream_, http::make_chunk(net::buffer(*data)), std::move(written));
      } else {
        net::async_write(stream_, net::buffer(*data), std::move(written));
      }
      return;
    }
    if (ending_ && !stream_chunked_) return EndStream(false);
    if (ending_) {
      writing_ = true;
      net::async_write(stream_, http::make_chunk_last(), [self](beast::error_code ec, size_t) {
        self->writing_ = false;
        self->EndStream(static_cast<bool>(ec));
      });
    }
  }

  void EndStream(bool failed) {
    ending_ = false;
    header_.reset();
    serializer_.reset();
    shared_.in_progress.End();
    if (failed || !stream_keep_alive_) return Close();
    Read();
  }

  void Write(HttpResponse res, std::optional<http::status> status = std::nullopt) {
    int pending = kPending;  // answered on the strand: no other thread may claim it now
    answer_state_.compare_exchange_strong(pending, kOpen, std::memory_order_relaxed);
    responded_ = requests_;
    if (status) res.result(*status);
    PrepareAnswer(std::move(res));
    net::async_write(stream_, AnswerBuffers(),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->Written(ec);
                     });
  }

  // Keeps `res` and its header text here until the write completes: one answer is written at
  // a time per connection. Strand, or the thread that claimed the answer.
  void PrepareAnswer(HttpResponse res) {
    --shared_.handling;
    if (shared_.draining || refuse_) res.keep_alive(false);
    shared_.policy.AddCorsHeaders(origin_, res.base());
    answer_ = std::move(res);
    WriteResponseHeader(answer_, answer_header_);
  }

  std::array<net::const_buffer, 2> AnswerBuffers() const {
    return {net::buffer(answer_header_), net::buffer(answer_.body())};
  }

  void Written(beast::error_code ec) {
    shared_.in_progress.End();
    // The answer's memory goes now, not when the next answer replaces it.
    const bool keep_alive = answer_.keep_alive();
    shared_.ReturnFreedMemory(request_bytes_ + std::exchange(answer_, {}).body().size());
    if (ec) return Close();
    if (!keep_alive || poisoned_) return Drain();
    Read();
  }

  // Runs `task`, which ends in this connection's one answer, on the calling thread when the
  // thread may (MayAnswerHere) and the answer is still pending; else on the strand.
  void AnswerHere(std::function<void()> task) {
    int pending = kPending;
    if (!MayAnswerHere() ||
        !answer_state_.compare_exchange_strong(pending, kClaimed, std::memory_order_acquire)) {
      return net::dispatch(stream_.get_executor(), std::move(task));
    }
    t_answering = this;
    // When it did not answer after all (or threw), the claim goes back: the strand answers.
    struct Unclaim {
      Connection* self;
      ~Unclaim() {
        if (t_answering != self) return;
        t_answering = nullptr;
        self->answer_state_.store(kPending, std::memory_order_release);
      }
    } unclaim{this};
    task();
  }

  // Writes the claimed answer from this thread, as much as the socket takes now without
  // blocking (all of it, usually); the strand writes the rest and reads the next request.
  void WriteHere(HttpResponse res) {
    t_answering = nullptr;
    PrepareAnswer(std::move(res));
    const auto buffers = AnswerBuffers();
    std::array<iovec, 2> iov{};
    for (size_t i = 0; i < iov.size(); ++i) {
      iov[i].iov_base = const_cast<void*>(buffers[i].data());
      iov[i].iov_len = buffers[i].size();
    }
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = iov.size();
    const ssize_t n =
        ::sendmsg(stream_.socket().native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    const int error = n < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? errno : 0;
    answer_state_.store(kOpen, std::memory_order_release);
    net::post(stream_.get_executor(),
              [self = shared_from_this(), sent = n > 0 ? static_cast<size_t>(n) : 0, error] {
                self->WrittenHere(sent, error);
              });
  }

  void WrittenHere(size_t sent, int error) {
    responded_ = requests_;
    if (error != 0) return Written(beast::error_code(error, beast::system_category()));
    const auto buffers = AnswerBuffers();
    if (sent == net::buffer_size(buffers)) return Written({});
    beast::buffers_suffix<std::array<net::const_buffer, 2>> rest(buffers);
    rest.consume(sent);
    net::async_write(stream_, rest, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->Written(ec);
    });
  }

  // Half-closes and discards what the client still sends (bounded), then closes.
  void Drain() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(refuse_ ? kRefusedTimeout : kDrainTimeout);
    drained_ = 0;
    DrainSome();
  }

  void DrainSome() {
    discard_.resize(64 * 1024);
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kMaxDrainBytes) return self->Close();
                              self->DrainSome();
                            });
  }

  void Close() {
    awaiting_request_ = false;
    idle_timer_.cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  TcpStream stream_;
  Timer idle_timer_;  // strand only, like the members below
  enum class ReadPhase { kIdle, kHeader, kBody };
  ReadPhase phase_ = ReadPhase::kIdle;
  std::chrono::steady_clock::time_point phase_started_;
  bool read_timer_armed_ = false;
  bool awaiting_request_ = false;  // reading the next request (the idle timeout applies)
  FrontendShared& shared_;  // not owned; outlives every connection (the I/O threads are joined first)
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::vector<char> discard_;
  size_t drained_ = 0;
  // Streaming (server-sent events) state; strand only, except broken_.
  HttpResponse answer_;          // being written by Write
  std::string answer_header_;   // its header text
  std::optional<http::response<http::empty_body>> header_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool ending_ = false;
  bool stream_keep_alive_ = false;
  bool stream_chunked_ = true;
  std::atomic<bool> broken_{false};
  // Who writes the pending answer. kPending: a request handed to the router waits for its one
  // answer, which a worker may claim (AnswerHere); kClaimed: a thread owns the socket's write
  // side for now (that worker, or the hang-up probe on the strand); kOpen: anything else — the
  // strand alone writes.
  enum AnswerState : int { kOpen, kPending, kClaimed };
  std::atomic<int> answer_state_{kOpen};
  bool poisoned_ = false;  // a handler threw: later answers are dropped (strand only)
  const bool refuse_;
  std::string origin_;      // the current request's Origin header (strand only)
  uint64_t requests_ = 0;   // requests read on this connection (strand only)
  size_t request_bytes_ = 0;  // the current request's body size (strand only)
  unsigned request_version_ = 11;  // the current request's HTTP version (strand only)
  bool request_keep_alive_ = true;  // and whether it keeps the connection open
  uint64_t responded_ = 0;  // the last one whose answer started (strand only)
};

}  // namespace

void StartConnection(Socket socket, FrontendShared& shared, bool refuse) {
  std::make_shared<Connection>(std::move(socket), shared, refuse)->Start();
}

}  // namespace mmserve
