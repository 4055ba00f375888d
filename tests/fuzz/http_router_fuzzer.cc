// Fuzzes everything behind the HTTP framing: the router, KServe v2 routes, the OpenAI, rerank and
// TEI request parsers, the repository and job routes. Input: "METHOD TARGET\n" then the body.
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
  void Validate(const ModelConfig& m, ConfigErrors& e) const override { inner_.Validate(m, e); }
  Result<MemoryEstimate> Estimate(const ModelConfig& m) const override {
    return inner_.Estimate(m);
  }
  Result<std::unique_ptr<Session>> Load(const ModelConfig& m) override { return inner_.Load(m); }
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
  static World* world = new World();
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t line_end = input.find('\n');
  if (line_end == std::string::npos) return 0;
  const std::string line = input.substr(0, line_end);
  const size_t space = line.find(' ');
  if (space == std::string::npos) return 0;
  const auto method = boost::beast::http::string_to_verb(line.substr(0, space));
  std::string target = line.substr(space + 1);
  // Reloads re-read the file and repository loads add models: both are the config fuzzer's.
  if (target.empty() || target[0] != '/' || target.find("/repository/") != std::string::npos) {
    return 0;
  }
  HttpRequest request(method == boost::beast::http::verb::unknown ? boost::beast::http::verb::post
                                                                  : method,
                      target, 11);
  request.body() = input.substr(line_end + 1);
  request.set(boost::beast::http::field::content_type, "application/json");
  if (size > 2 && data[size - 1] == '!') {
    request.set("Inference-Header-Content-Length", std::to_string(data[size - 2]));
  }
  // As the parser leaves it (prepare_payload() refuses a body on some methods, a frame never does).
  request.content_length(request.body().size());
  world->router->Handle(
      std::move(request), [](HttpResponse) {},
      HttpConnection{.dispatch = [](std::function<void()> task) { task(); },
                     .open_stream = [] { return std::make_shared<NullStream>(); },
                     .client_gone = [] { return false; }});
  return 0;
}
