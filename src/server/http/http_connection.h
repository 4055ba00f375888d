// One HTTP/1.1 client connection of the HTTP frontend: reads requests within deadlines (idle,
// header, body), hands each to the router, writes its response or stream, and enforces the
// connection and in-flight limits. http_frontend.cc accepts connections and starts them here.
// Internal to server/http.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/http/http_router.h"
#include "server/http/request_policy.h"

namespace mmserve {

namespace net = boost::asio;
namespace beast = boost::beast;

// Each connection's handlers run on its own strand. Naming the strand's type (rather than
// Beast's tcp_stream, whose executor is type-erased) spares a shared allocation and an
// indirect call in every async operation.
using Strand = net::strand<net::io_context::executor_type>;
using Socket = net::ip::tcp::socket::rebind_executor<Strand>::other;

// Connections over max_connections are still read (a health probe is answered, anything else
// 503 with Retry-After). While this many more are open, accepting pauses: further clients wait in
// the listen backlog until one closes, to be answered in turn rather than closed unanswered.
constexpr int kMaxRefusing = 32;
// Threads that route requests whose bodies are too large to parse on an I/O thread.
constexpr int kBodyThreads = 2;
// File descriptors kept for everything but connections: model files, gRPC, logs.
constexpr int kReservedDescriptors = 128;

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

struct FrontendShared {
  HttpRouter router;
  size_t max_body_bytes;
  int max_connections;
  int64_t max_in_flight;
  RequestPolicy policy;  // Host, Origin, Content-Type (request_policy.h)
  InProgress in_progress;  // read → response written (graceful shutdown waits for it)
  // Read → response ready to write: what max_in_flight bounds. It drops before the write
  // completes, so a client that has its answer never finds its own request still counted.
  std::atomic<int64_t> handling{0};
  std::atomic<bool> draining{false};
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> refused_connections{0};
  std::atomic<int64_t> refused_requests{0};
  std::atomic<int64_t> last_trim_ns{INT64_MIN / 2};  // steady clock: the last malloc_trim
  // Set by the acceptor when max_connections + kMaxRefusing are open; the connection whose
  // close brings the count under that clears it and calls resume_accept (set before the first
  // accept; it only posts to the acceptor's strand).
  std::atomic<bool> accept_paused{false};
  std::function<void()> resume_accept;
  // Requests with large bodies are routed here, off the I/O threads (http_connection.cc).
  // HttpFrontend::Stop() joins it and destroys what it left queued, while the I/O context that
  // their connections' sockets belong to is still there.
  std::optional<net::thread_pool> body_pool{std::in_place, kBodyThreads};

  // After an exchange (request and answer) of `bytes`: a large one (1 MiB or more) hands the
  // allocator's free memory back to the system (malloc_trim, on a body thread, at most once a
  // second). glibc keeps a thread arena's free memory while any block above it is in use, and a
  // few large exchanges kept tens of MiB each (a 4 MiB /tokenize: 50 MiB).
  void ReturnFreedMemory(size_t bytes);
  // A connection closed: resumes accepting if it was paused at the limit.
  void ConnectionClosed() {
    const int64_t open = --connections;
    if (open < int64_t{max_connections} + kMaxRefusing && !draining &&
        accept_paused.exchange(false)) {
      resume_accept();
    }
  }
};

// Starts serving `socket`; the connection keeps itself alive until it closes. `refuse`: the
// server has too many connections, and this one answers its first request 503 (health probes
// excepted).
void StartConnection(Socket socket, FrontendShared& shared, bool refuse);

}  // namespace mmserve
