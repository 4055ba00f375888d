// Fuzzes an HTTP request from its bytes on: Beast's request parser with the frontend's limits
// (the framing), then the router, KServe v2 routes, the OpenAI, rerank and TEI request parsers,
// jobs, metadata, the status page and its query parameters (/v2/events?after=). Input: the raw
// request, as a client would send it.
// The models are identity models (inline, so every answer comes before Handle returns) that
// claim the generate, embed and rerank tasks, so the OpenAI parsers run to the end.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend_registry.h"
#include "backend/identity/identity_backend.h"
#include "config/config_parser.h"
#include "runtime/host_runtime.h"
#include "runtime/runtime_guard.h"
#include "server/http/http_router.h"
#include "service/inference_service.h"

namespace {

using namespace mmserve;

// The identity backend under another name, serving the llama tasks.
class TaskedIdentity final : public Backend {
 public:
  explicit TaskedIdentity(Runtime& runtime) : inner_(runtime) {}
  std::string name() const override { return "tasked"; }
  std::vector<std::string> tasks() const override { return {"generate", "embed", "rerank"}; }
  bool needs_path() const override { return false; }
  Runtime& runtime() override { return inner_.runtime(); }
  void Validate(ModelConfig& m, ConfigErrors& e) const override { inner_.Validate(m, e); }
  Result<MemoryEstimate> Estimate(const ModelConfig& m) const override {
    return inner_.Estimate(m);
  }
  Result<std::unique_ptr<Session>> LoadSession(const ModelConfig& m, LoadProgress& p) override {
    return inner_.Load(m, &p);
  }
  bool ExecutesInline(const ModelConfig& m) const override { return inner_.ExecutesInline(m); }

 private:
  IdentityBackend inner_;
};

class NullStream final : public HttpStream {
 public:
  void Start(HttpResponse) override {}
  void Send(std::string) override {}
  void End() override {}
  bool broken() const override { return false; }
};

constexpr char kConfig[] = R"(
global: {jobs: {max: 8}}
models:
  - {name: echo, backend: identity, execution: inline}
  - {name: llm, backend: tasked, task: generate, execution: inline}
  - {name: embedder, backend: tasked, task: embed, execution: inline}
  - {name: reranker, backend: tasked, task: rerank, execution: inline}
)";

struct World {
  World() {
    backends.Register(std::make_unique<IdentityBackend>(host));
    backends.Register(std::make_unique<TaskedIdentity>(host));
    auto config = ParseConfig(kConfig, "/nonexistent/fuzz.yaml", backends);
    if (!config.ok()) abort();
    service = std::make_unique<InferenceService>(std::move(*config), backends, guard);
    service->LoadStartupModels();
    router = std::make_unique<HttpRouter>(*service, HttpRouter::Options{});
  }
  HostRuntime host;
  BackendRegistry backends;
  RuntimeGuard guard;
  std::unique_ptr<InferenceService> service;
  std::unique_ptr<HttpRouter> router;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = boost::beast::http;
  static World* world = new World();
  // The framing, as the connection reads it: header, then the body with the frontend's limits.
  http::request_parser<http::string_body> parser;
  parser.body_limit(1u << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  boost::asio::const_buffer input(data, size);
  while (!parser.is_done() && input.size() > 0) {
    const size_t used = parser.put(input, ec);
    input += used;
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec) return 0;  // answered 400 by the connection
    if (used == 0) break;
  }
  if (!parser.is_done()) return 0;  // the connection would wait for the rest, then time out
  HttpRequest request = parser.release();
  // Reloads re-read the file and repository loads add models: both are the config fuzzer's.
  if (request.target().find("/repository/") != boost::beast::string_view::npos) return 0;
  world->router->Handle(
      std::move(request), [](HttpResponse) {},
      HttpConnection{.dispatch = [](std::function<void()> task) { task(); },
                     .answer = [](std::function<void()> task) { task(); },
                     .open_stream = [] { return std::make_shared<NullStream>(); },
                     .client_gone = [] { return false; }});
  return 0;
}
