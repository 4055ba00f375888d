// HttpFrontend: the KServe v2 REST frontend over Boost.Beast. A fixed pool of I/O threads runs
// the acceptor and every connection (HTTP/1.1 keep-alive); handlers parse and validate on the
// I/O thread, Submit() to the InferenceService and write the response when its callback fires
// (posted back onto the connection's strand), so no I/O thread ever waits on a model.
//
// Threads: owns `threads` I/O threads, started by Create() and joined by Stop()/the destructor.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "service/inference_service.h"

namespace mmserve {

class HttpRouter;

class HttpFrontend {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8000;  // 0 = an ephemeral port; see port()
    int threads = 2;
    size_t max_body_bytes = 64u << 20;
    std::string api_key;    // Bearer key for inference; empty = none (server/access.h)
    std::string admin_key;  // Bearer key for load/unload/reload; empty = the api_key
    int max_connections = 1024;  // beyond: the request is answered 503 and the connection closed
    int64_t max_in_flight = 0;   // requests handled at once; beyond: 503; 0 = no limit
    std::vector<std::string> cors_origins;  // allowed origins ("*": any); empty = no CORS
    // Host names served besides IP addresses, localhost and this machine's name ("name",
    // ".suffix", "*"): server/http/request_policy.h.
    std::vector<std::string> allowed_hosts;
  };

  // Binds and starts serving. `service` is not owned and must outlive the frontend.
  static Result<std::unique_ptr<HttpFrontend>> Create(Options options, InferenceService& service);
  ~HttpFrontend();

  int port() const { return port_; }
  // Stops accepting connections; each open connection closes after its current response.
  void StopAccepting();
  // Waits until no request is being handled; false if `timeout` passed first.
  bool WaitIdle(std::chrono::milliseconds timeout);
  // Stops the I/O threads (abandoning idle connections) and joins them. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit HttpFrontend(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace mmserve
