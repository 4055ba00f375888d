// HttpRouter: every HTTP route, in one RouteTable (route_table.h): the KServe v2 REST routes,
// the server's own (health, metrics, the status page) and OpenAiApi's. Handle() finds the
// route, checks its scope and method, and runs its handler on an I/O thread (a request with a
// large body on a body thread); the handler calls `reply` once, at once or later (through
// `dispatch`, on the connection's strand).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <string>

#include "server/access.h"
#include "server/http/http_response.h"
#include "server/http/json_codec.h"
#include "server/http/route_table.h"
#include "server/prometheus.h"
#include "service/inference_service.h"

namespace mmserve {

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

 private:
  enum class RepositoryOp { kIndex, kReload, kLoad, kUnload };

  // The routes above, into routes_ (the constructor; OpenAiApi adds its own): the server's own,
  // then the models' (/v2/models, the repository, jobs).
  void Add(std::string pattern, std::vector<boost::beast::http::verb> methods, Scope scope,
           std::function<void(RouteCall&)> handler);
  void AddServerRoutes();
  void AddModelRoutes();
  // The model a /v2/models route names: by name ('n'), version ('v') or label ('l').
  static Result<ModelRef> RefOf(const RouteCall& call, char kind);
  void HandleModel(const HttpRequest& request, const ModelRef& ref, const std::string& action,
                   HttpReply reply);
  void HandleInfer(HttpRequest request, const ModelRef& ref, HttpReply reply,
                   HttpConnection connection);
  // The repository extension: POST /v2/repository/index, /v2/repository/models/{m}/load and
  // /unload, and mmserve's /v2/repository/reload (re-read the YAML file).
  void HandleRepository(RouteCall& call, RepositoryOp op);
  // With the request parameter "async": true (or "Prefer: respond-async"): 202 with the job's
  // id and URL at once; GET /v2/jobs/{id} gives its status, then its result.
  void StartJob(std::unique_ptr<InferRequest> infer, int64_t model_version,
                const HttpReply& reply);
  void HandleJob(const HttpRequest& request, const std::string& id, const HttpReply& reply);
  // With the request parameter "stream": true — each partial output (a generated token's text)
  // is an SSE event `data: <infer response JSON>`; the last event is the complete response.
  void StreamInfer(std::unique_ptr<InferRequest> infer, ResponseContext ctx,
                   HttpDispatch dispatch, std::shared_ptr<HttpStream> stream);

  InferenceService& service_;  // not owned
  Options options_;
  std::unique_ptr<OpenAiApi> openai_;
  RouteTable routes_;
};

}  // namespace mmserve
