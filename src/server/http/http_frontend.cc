#include "server/http/http_frontend.h"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/logging.h"
#include "server/http/http_router.h"

namespace mmserve {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// Each connection's handlers run on its own strand. Naming the strand's type (rather than
// Beast's tcp_stream, whose executor is type-erased) spares a shared allocation and an
// indirect call in every async operation.
using Strand = net::strand<net::io_context::executor_type>;
using Socket = tcp::socket::rebind_executor<Strand>::other;
using TcpStream = beast::basic_stream<tcp, Strand>;
using Timer = net::steady_timer::rebind_executor<Strand>::other;

// A connection must deliver its next request whole within this long, or it is closed.
constexpr auto kIdleTimeout = std::chrono::seconds(60);
// Read in pieces this large: a typical request in one recvmsg rather than 512-byte bites.
constexpr size_t kReadBufferBytes = 16 * 1024;
// After refusing a request (413, malformed), read and discard at most this much of what the
// client is still sending before closing, so that it can read the refusal instead of a reset.
constexpr size_t kMaxDrainBytes = 256u << 20;
constexpr auto kDrainTimeout = std::chrono::seconds(10);

// Counts requests between "read complete" and "response written", for graceful shutdown. The
// count is an atomic that both I/O threads touch; the lock is taken only when it drops to zero.
class InProgress {
 public:
  void Begin() { count_.fetch_add(1, std::memory_order_relaxed); }
  void End() {
    if (count_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // Notified under the lock: a waiter that saw a count above zero is already waiting.
    std::lock_guard lock(mu_);
    idle_.notify_all();
  }
  bool WaitIdle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return idle_.wait_for(lock, timeout, [&] { return count_.load() == 0; });
  }

 private:
  std::atomic<int64_t> count_{0};
  std::mutex mu_;
  std::condition_variable idle_;
};

struct Shared {
  HttpRouter router;
  size_t max_body_bytes;
  int max_connections;
  int64_t max_in_flight;
  std::vector<std::string> cors_origins;
  InProgress in_progress;  // read → response written (graceful shutdown waits for it)
  // Read → response ready to write: what max_in_flight bounds. It drops before the write
  // completes, so a client that has its answer never finds its own request still counted.
  std::atomic<int64_t> handling{0};
  std::atomic<bool> draining{false};
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> refused_connections{0};
  std::atomic<int64_t> refused_requests{0};

  // The Access-Control-Allow-Origin value for `origin`, or "" when it is not allowed.
  std::string AllowedOrigin(const std::string& origin) const {
    if (origin.empty()) return {};
    for (const auto& o : cors_origins) {
      if (o == "*" || o == origin) return o == "*" ? "*" : origin;
    }
    return {};
  }
};

// 503 (with Retry-After): the server is at a limit; the client should come back shortly.
HttpResponse Overloaded(const std::string& why) {
  return HttpRouter::ErrorResponse(Unavailable(why), 11, false);
}

// One client connection: read a request, hand it to the router, write its response, repeat.
// All of its handlers run on its strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `refuse`: the server has too many connections; this one answers its first request 503.
  Connection(Socket socket, Shared& shared, bool refuse)
      : stream_(std::move(socket)),
        idle_timer_(stream_.get_executor()),
        shared_(shared),
        refuse_(refuse) {
    ++shared_.connections;
    buffer_.reserve(kReadBufferBytes);
  }
  ~Connection() { --shared_.connections; }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Read(); });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(shared_.max_body_bytes);
    awaiting_request_ = true;
    idle_deadline_ = std::chrono::steady_clock::now() + kIdleTimeout;
    ArmIdleTimer();
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRead(ec);
                     });
  }

  // The idle timeout, kept lazily: a request moves idle_deadline_ without touching the timer
  // (Beast's per-operation timeouts would arm and cancel a timer on every read, and each
  // cancellation wakes another I/O thread); when the timer fires early it re-arms for the
  // deadline now due.
  void ArmIdleTimer() {
    if (idle_timer_armed_) return;
    idle_timer_armed_ = true;
    idle_timer_.expires_at(idle_deadline_);
    idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      self->idle_timer_armed_ = false;
      if (ec || !self->awaiting_request_) return;  // cancelled, or busy with a request
      if (std::chrono::steady_clock::now() >= self->idle_deadline_) return self->Close();
      self->ArmIdleTimer();
    });
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
      return Write(HttpRouter::ErrorResponse(
                       ResourceExhausted("request body exceeds the limit of " +
                                         std::to_string(shared_.max_body_bytes) +
                                         " bytes (global.max_request_mb)"),
                       11, false),
                   http::status::payload_too_large);
    }
    if (ec) {
      return Write(HttpRouter::ErrorResponse(
          InvalidArgument("malformed HTTP request: " + ec.message()), 11, false));
    }
    origin_.clear();
    if (auto it = parser_->get().find(http::field::origin); it != parser_->get().end()) {
      origin_ = std::string(it->value());
    }
    if (refuse_) {
      shared_.refused_connections++;
      return Write(Overloaded("too many connections (global.max_connections is " +
                              std::to_string(shared_.max_connections) + ")"));
    }
    if (shared_.max_in_flight > 0 && handling > shared_.max_in_flight) {
      shared_.refused_requests++;
      HttpResponse res = Overloaded("too many requests in progress (global.max_in_flight is " +
                                    std::to_string(shared_.max_in_flight) + ")");
      res.keep_alive(parser_->get().keep_alive());
      return Write(std::move(res));
    }
    if (parser_->get().method() == http::verb::options &&
        parser_->get().find(http::field::access_control_request_method) != parser_->get().end()) {
      return Preflight();
    }
    auto self = shared_from_this();
    const uint64_t request = ++requests_;
    shared_.router.Handle(
        parser_->release(),
        [self](HttpResponse res) {
          net::dispatch(self->stream_.get_executor(),
                        [self, res = std::move(res)]() mutable { self->Write(std::move(res)); });
        },
        HttpConnection{
            .dispatch =
                [self](std::function<void()> task) {
                  net::dispatch(self->stream_.get_executor(), std::move(task));
                },
            .open_stream = [self]() -> std::shared_ptr<HttpStream> {
              return std::make_shared<Stream>(self);
            },
            .client_gone = [self] { return self->broken_.load(); }});
    // An answer already on its way (an inline execution) has no client to watch for.
    if (responded_ != request) WatchForHangUp(request);
  }

  // A CORS preflight: 204 with what an allowed origin may send, else 403.
  void Preflight() {
    const auto& req = parser_->get();
    const std::string allowed = shared_.AllowedOrigin(origin_);
    if (allowed.empty()) {
      HttpResponse res = HttpRouter::ErrorResponse(
          PermissionDenied("origin '" + origin_ + "' is not allowed (global.cors_origins)"),
          req.version(), req.keep_alive());
      return Write(std::move(res));
    }
    HttpResponse res(http::status::no_content, req.version());
    res.keep_alive(req.keep_alive());
    res.set(http::field::access_control_allow_methods, "GET, POST, DELETE, OPTIONS");
    if (auto it = req.find(http::field::access_control_request_headers); it != req.end()) {
      res.set(http::field::access_control_allow_headers, it->value());
    }
    res.set(http::field::access_control_max_age, "600");
    res.prepare_payload();
    Write(std::move(res));
  }

  void AddCorsHeaders(http::fields& fields) const {
    const std::string allowed = shared_.AllowedOrigin(origin_);
    if (allowed.empty()) return;
    fields.set(http::field::access_control_allow_origin, allowed);
    if (allowed != "*") fields.set(http::field::vary, "Origin");
    fields.set(http::field::access_control_expose_headers,
               "Inference-Header-Content-Length, Retry-After, Location");
  }

  // While request `request` is pending, notices the client closing the connection (a readable
  // socket with nothing to read) and marks it broken, so that its work can be cancelled. A
  // pipelined next request makes the socket readable too; that is not a hang-up.
  void WatchForHangUp(uint64_t request) {
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this(), request](beast::error_code ec) {
          if (ec || request != self->requests_ || self->responded_ == request) return;
          char byte;
          const ssize_t n =
              ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            self->broken_ = true;
          }
        });
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
    if (shared_.draining) headers.keep_alive(false);
    stream_keep_alive_ = headers.keep_alive();
    header_.emplace(headers.result(), headers.version());
    for (const auto& field : headers) header_->set(field.name_string(), field.value());
    AddCorsHeaders(header_->base());
    header_->keep_alive(stream_keep_alive_);
    header_->chunked(true);
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
      net::async_write(stream_, http::make_chunk(net::buffer(*data)),
                       [self, data](beast::error_code ec, size_t) {
                         self->writing_ = false;
                         if (ec) self->broken_ = true;
                         self->Pump();
                       });
      return;
    }
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
    --shared_.handling;
    responded_ = requests_;
    if (status) res.result(*status);
    if (shared_.draining || refuse_) res.keep_alive(false);
    AddCorsHeaders(res.base());
    // One answer is written at a time per connection: it and its header text live here until
    // the write completes.
    answer_ = std::move(res);
    WriteHeader(answer_, answer_header_);
    const std::array<net::const_buffer, 2> buffers{net::buffer(answer_header_),
                                                   net::buffer(answer_.body())};
    net::async_write(stream_, buffers, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->shared_.in_progress.End();
      if (ec) return self->Close();
      if (!self->answer_.keep_alive()) return self->Drain();
      self->Read();
    });
  }

  // The status line and the fields of `res` as HTTP/1.x text, ending with the empty line. Every
  // answer written here carries its Content-Length (streams are written by Stream), so its
  // header is only that: Beast's serializer, made for chunked and streamed bodies too, cost as
  // much CPU as the rest of the write.
  static void WriteHeader(const HttpResponse& res, std::string& out) {
    out.clear();
    out += "HTTP/";
    out += static_cast<char>('0' + res.version() / 10);
    out += '.';
    out += static_cast<char>('0' + res.version() % 10);
    out += ' ';
    out += std::to_string(res.result_int());
    out += ' ';
    const auto reason = res.reason();
    out.append(reason.data(), reason.size());
    out += "\r\n";
    for (const auto& field : res.base()) {
      const auto name = field.name_string();
      const auto value = field.value();
      out.append(name.data(), name.size());
      out += ": ";
      out.append(value.data(), value.size());
      out += "\r\n";
    }
    out += "\r\n";
  }

  // Half-closes and discards what the client still sends (bounded), then closes.
  void Drain() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kDrainTimeout);
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
  std::chrono::steady_clock::time_point idle_deadline_;
  bool idle_timer_armed_ = false;
  bool awaiting_request_ = false;  // reading the next request (the idle timeout applies)
  Shared& shared_;  // not owned; outlives every connection (the I/O threads are joined first)
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
  std::atomic<bool> broken_{false};
  const bool refuse_;
  std::string origin_;      // the current request's Origin header (strand only)
  uint64_t requests_ = 0;   // requests read on this connection (strand only)
  uint64_t responded_ = 0;  // the last one whose answer started (strand only)
};

}  // namespace

struct HttpFrontend::Impl {
  Impl(const Options& options, InferenceService& service)
      : ioc(options.threads),
        work(net::make_work_guard(ioc)),
        acceptor(net::make_strand(ioc)),
        shared{HttpRouter(service, {.access = Access(options.api_key, options.admin_key),
                                    .server_metrics = [this] { return Metrics(); }}),
               options.max_body_bytes, options.max_connections, options.max_in_flight,
               options.cors_origins} {}

  ServerMetrics Metrics() {
    return {.open_connections = shared.connections.load(),
            .requests_in_progress = shared.handling.load(),
            .refused_connections = shared.refused_connections.load(),
            .refused_requests = shared.refused_requests.load()};
  }

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, Socket s) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) {
        s.set_option(tcp::no_delay(true), ec);
        const bool refuse = shared.connections.load() >= shared.max_connections;
        std::make_shared<Connection>(std::move(s), shared, refuse)->Start();
      }
      Accept();
    });
  }

  net::io_context ioc;
  // Keeps the I/O threads running while every connection waits on a model and the acceptor is
  // closed (graceful shutdown): their responses still need a thread to be written on.
  net::executor_work_guard<net::io_context::executor_type> work;
  tcp::acceptor acceptor;
  Shared shared;
  std::vector<std::jthread> threads;  // last: joined before the members above are destroyed
};

HttpFrontend::HttpFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<HttpFrontend>> HttpFrontend::Create(Options options,
                                                          InferenceService& service) {
  auto impl = std::make_unique<Impl>(options, service);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) return InvalidArgument("global.host: '" + options.host + "' is not an IP address");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  const std::string where = options.host + ":" + std::to_string(options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return FailedPrecondition("cannot listen on " + where + ": " + ec.message());

  std::unique_ptr<HttpFrontend> frontend(new HttpFrontend(std::move(impl)));
  frontend->port_ = frontend->impl_->acceptor.local_endpoint().port();
  Impl& i = *frontend->impl_;
  i.Accept();
  for (int t = 0; t < options.threads; ++t) {
    i.threads.emplace_back([&i] { i.ioc.run(); });
  }
  return frontend;
}

HttpFrontend::~HttpFrontend() { Stop(); }

void HttpFrontend::StopAccepting() {
  impl_->shared.draining = true;
  net::post(impl_->acceptor.get_executor(), [this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
  });
}

bool HttpFrontend::WaitIdle(std::chrono::milliseconds timeout) {
  return impl_->shared.in_progress.WaitIdle(timeout);
}

void HttpFrontend::Stop() {
  if (impl_->threads.empty()) return;
  impl_->work.reset();
  impl_->ioc.stop();
  impl_->threads.clear();  // joins
}

}  // namespace mmserve
