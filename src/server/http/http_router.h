// HttpRouter: the KServe v2 REST routes. Handle() runs on an I/O thread and calls `reply` once,
// at once or later (through `dispatch`, on the connection's strand).
#pragma once

#include <functional>
#include <string>

#include <boost/beast/http.hpp>

#include "server/access.h"
#include "server/http/json_codec.h"
#include "server/prometheus.h"
#include "service/inference_service.h"

namespace mmserve {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;
using HttpReply = std::function<void(HttpResponse)>;
// Runs a closure on the connection's I/O strand: responses are encoded there, never on a
// model's worker thread. At once when the caller is on the strand already (an inline
// execution answers within the read handler: no second thread is woken), else queued to it.
using HttpDispatch = std::function<void(std::function<void()>)>;

// A chunked response written piece by piece (server-sent events). Start() sends the headers,
// Send() one chunk, End() the last chunk; they must run on the connection's strand (through
// HttpDispatch), in that order. broken() turns true, on any thread, once the client has gone away.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  virtual void Start(HttpResponse headers) = 0;
  virtual void Send(std::string chunk) = 0;
  virtual void End() = 0;
  virtual bool broken() const = 0;
};
using HttpOpenStream = std::function<std::shared_ptr<HttpStream>()>;

// What a handler may know about its connection while the answer is pending. Any thread.
struct HttpConnection {
  HttpDispatch dispatch;
  HttpOpenStream open_stream;
  std::function<bool()> client_gone;  // true once the client closed the connection
};

class OpenAiApi;

class HttpRouter {
 public:
  struct Options {
    Access access;  // API and admin keys
    // The frontend's own figures for /metrics; optional.
    std::function<ServerMetrics()> server_metrics;
  };
  // `service` is not owned and outlives the router.
  HttpRouter(InferenceService& service, Options options);
  ~HttpRouter();

  void Handle(HttpRequest request, HttpReply reply, HttpConnection connection);

  // 429 and 503 pass (a full queue, a model loading, a limit reached): the answer says when to
  // come back. Every error answer goes through here.
  static void MarkRetryable(HttpResponse& response);
  // {"error": message} with the status that `status` maps to.
  static HttpResponse ErrorResponse(const Status& status, unsigned version, bool keep_alive);
  static HttpResponse JsonResponse(boost::beast::http::status code, std::string body,
                                   unsigned version, bool keep_alive);

 private:
  // A model as a URL names it: by version, by label, or neither (the service routes).
  struct ModelRef {
    std::string name;
    int64_t version = 0;
    std::string label;
  };
  void HandleModel(const HttpRequest& request, const ModelRef& ref, const std::string& action,
                   HttpReply reply);
  void HandleInfer(HttpRequest request, const ModelRef& ref, HttpReply reply,
                   HttpConnection connection);
  // The repository extension: POST /v2/repository/index, /v2/repository/models/{m}/load and
  // /unload, and mmserve's /v2/repository/reload (re-read the YAML file).
  void HandleRepository(HttpRequest request, const std::string& target, HttpReply reply,
                        HttpConnection connection);
  // With the request parameter "async": true (or "Prefer: respond-async"): 202 with the job's
  // id and URL at once; GET /v2/jobs/{id} gives its status, then its result.
  void StartJob(std::unique_ptr<InferRequest> infer, int64_t model_version, unsigned version,
                bool keep_alive, const HttpReply& reply);
  void HandleJob(const HttpRequest& request, const std::string& id, const HttpReply& reply);
  // With the request parameter "stream": true — each partial output (a generated token's text)
  // is an SSE event `data: <infer response JSON>`; the last event is the complete response.
  void StreamInfer(std::unique_ptr<InferRequest> infer, ResponseContext ctx, unsigned version,
                   bool keep_alive, HttpDispatch dispatch, std::shared_ptr<HttpStream> stream);

  InferenceService& service_;  // not owned
  Options options_;
  std::unique_ptr<OpenAiApi> openai_;
};

}  // namespace mmserve
