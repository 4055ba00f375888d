#include "server/http/http_frontend.h"

#include <malloc.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <string>

#include "common/logging.h"
#include "server/http/http_connection.h"

namespace mmserve {

namespace http = beast::http;
using tcp = net::ip::tcp;

void FrontendShared::ReturnFreedMemory(size_t bytes) {
  constexpr size_t kLargeExchangeBytes = 1u << 20;
  constexpr int64_t kMinIntervalNs = 1'000'000'000;
  if (bytes < kLargeExchangeBytes) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = last_trim_ns.load(std::memory_order_relaxed);
  if (now - last < kMinIntervalNs ||
      !last_trim_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    return;
  }
  net::post(*body_pool, [] { malloc_trim(0); });
}

struct HttpFrontend::Impl {
  Impl(const Options& options, InferenceService& service)
      : shared{HttpRouter(service, {.access = Access(options.api_key, options.admin_key),
                                    .server_metrics = [this] { return Metrics(); }}),
               options.max_body_bytes, options.max_connections, options.max_in_flight,
               RequestPolicy(options.allowed_hosts, options.cors_origins)},
        ioc(options.threads),
        work(net::make_work_guard(ioc)),
        acceptor(net::make_strand(ioc)) {
    shared.resume_accept = [this] { net::post(acceptor.get_executor(), [this] { Accept(); }); };
  }

  ServerMetrics Metrics() {
    return {.open_connections = shared.connections.load(),
            .requests_in_progress = shared.handling.load(),
            .refused_connections = shared.refused_connections.load(),
            .refused_requests = shared.refused_requests.load()};
  }

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, Socket s) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) return BackOff(ec);
      if (accept_backoff.count() > 0) {
        spdlog::info("http: accepting connections again ({} open)", shared.connections.load());
        accept_backoff = {};
      }
      s.set_option(tcp::no_delay(true), ec);
      StartConnection(std::move(s), shared, shared.connections.load() >= shared.max_connections);
      AcceptOrPause();
    });
  }

  // Accepts the next connection unless max_connections + kMaxRefusing are open; then the next
  // connection to close resumes (FrontendShared::ConnectionClosed). On the acceptor's strand.
  void AcceptOrPause() {
    const int64_t limit = int64_t{shared.max_connections} + kMaxRefusing;
    if (shared.connections.load() >= limit) {
      shared.accept_paused.store(true);
      // One may have closed before the flag was set, and found nothing to resume.
      if (shared.connections.load() >= limit || !shared.accept_paused.exchange(false)) return;
    }
    Accept();
  }

  // An accept that failed (out of file descriptors or memory) fails again at once: retrying
  // immediately spins a core. Waits, doubling up to a second, and says so once per episode.
  void BackOff(beast::error_code ec) {
    if (accept_backoff.count() == 0) {
      spdlog::warn("http: cannot accept connections: {} ({} open); retrying with back-off",
                   ec.message(), shared.connections.load());
    }
    accept_backoff = std::clamp(accept_backoff * 2, std::chrono::milliseconds(10),
                                std::chrono::milliseconds(1000));
    accept_timer.expires_after(accept_backoff);
    accept_timer.async_wait([this](beast::error_code ec) {
      if (!ec && acceptor.is_open()) Accept();
    });
  }

  // First: outlives the I/O context, whose destruction destroys the connections its pending
  // operations still hold, and each tells `shared` it closed.
  FrontendShared shared;
  net::io_context ioc;
  // Keeps the I/O threads running while every connection waits on a model and the acceptor is
  // closed (graceful shutdown): their responses still need a thread to be written on.
  net::executor_work_guard<net::io_context::executor_type> work;
  tcp::acceptor acceptor;
  net::steady_timer accept_timer{acceptor.get_executor()};  // the acceptor's strand only
  std::chrono::milliseconds accept_backoff{0};
  std::vector<std::jthread> threads;  // last: joined before the members above are destroyed
};

HttpFrontend::HttpFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

// Raises the soft open-file limit towards what max_connections needs; if the hard limit is lower,
// lowers max_connections to fit (with a warning that says how to raise it). Without this the
// default 1024 connections meet the usual limit of 1024 descriptors, and accept() fails.
int FitConnectionsToDescriptors(int max_connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return max_connections;
  const rlim_t wanted = static_cast<rlim_t>(max_connections) + kMaxRefusing + kReservedDescriptors;
  if (limit.rlim_cur < wanted && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = std::min(wanted, limit.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur >= wanted) return max_connections;
  const int fits = static_cast<int>(std::max<rlim_t>(
      16, limit.rlim_cur > kMaxRefusing + kReservedDescriptors
              ? limit.rlim_cur - kMaxRefusing - kReservedDescriptors
              : 16));
  spdlog::warn(
      "global.max_connections is {}, but this process may open only {} files (ulimit -n; {} are "
      "kept for models and gRPC): serving at most {} connections; raise the limit to {} to "
      "serve {}",
      max_connections, static_cast<uint64_t>(limit.rlim_cur),
      kMaxRefusing + kReservedDescriptors, fits, static_cast<uint64_t>(wanted), max_connections);
  return std::min(fits, max_connections);
}

}  // namespace

Result<std::unique_ptr<HttpFrontend>> HttpFrontend::Create(Options options,
                                                          InferenceService& service) {
  options.max_connections = FitConnectionsToDescriptors(options.max_connections);
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
    impl_->accept_timer.cancel();
  });
}

bool HttpFrontend::WaitIdle(std::chrono::milliseconds timeout) {
  return impl_->shared.in_progress.WaitIdle(timeout);
}

void HttpFrontend::Stop() {
  if (impl_->threads.empty()) return;
  impl_->shared.draining = true;  // a connection closed from here on resumes no accept
  impl_->work.reset();
  impl_->ioc.stop();
  impl_->threads.clear();  // joins
  impl_->shared.body_pool->stop();
  impl_->shared.body_pool->join();
  impl_->shared.body_pool.reset();
}

}  // namespace mmserve
