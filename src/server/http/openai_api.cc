#include "server/http/openai_api.h"

#include <filesystem>
#include <set>

#include "common/json.h"
#include "server/http/openai_common.h"
#include "server/http/stats_json.h"

namespace mmserve {

namespace http = boost::beast::http;
using nlohmann::json;
using openai::ApiError;
using openai::Dialect;

namespace {

// What GET /v1/models/{id} adds for one model: its file's size, the memory it holds, its
// context length per sequence and embedding width (once loaded), and its keep-alive.
void AddDetails(const ModelInfo& m, json& item) {
  std::error_code ec;
  const auto file_bytes = m.config.path.empty() ? 0 : std::filesystem::file_size(m.config.path, ec);
  item["size_bytes"] = ec || m.config.path.empty() ? json(nullptr) : json(file_bytes);
  item["memory_bytes"] = m.resident_bytes > 0 ? json(m.resident_bytes) : json(nullptr);
  item["context_length"] = m.context_length > 0 ? json(m.context_length) : json(nullptr);
  json width = nullptr;
  for (const auto& out : m.signature.outputs) {
    if (out.name == "EMBEDDING" && !out.shape.empty() && out.shape.back() > 0) {
      width = out.shape.back();
    }
  }
  item["embedding_length"] = width;
  item["keep_alive"] = KeepAliveJson(m);
}

// GET /v1/models[/{id}]: every served model (or the one named) with its task and state; the
// one named with its details.
HttpResponse ListModels(const InferenceService& service, std::string_view target, unsigned v,
                        bool ka) {
  const std::string only = target.size() > 11 ? std::string(target.substr(11)) : std::string();
  json data = json::array();
  std::set<std::string> seen;
  for (const auto& info : service.ListModels()) {
    if (!only.empty() && info.config.name != only) continue;
    if (!seen.insert(info.config.name).second) continue;
    auto current = service.GetModel(info.config.name);
    json versions = json::array();
    for (int64_t ver : info.versions) versions.push_back(std::to_string(ver));
    json item = {{"id", info.config.name},
                 {"object", "model"},
                 {"created", 0},
                 {"owned_by", "mmserve"},
                 {"task", info.config.task},
                 {"backend", info.config.backend},
                 {"versions", versions},
                 {"state", std::string(ModelStateName(current.ok() ? current->state
                                                                   : info.state))}};
    if (!only.empty()) AddDetails(current.ok() ? *current : info, item);
    data.push_back(std::move(item));
  }
  if (only.empty()) {
    return JsonResponse(http::status::ok, DumpJson({{"object", "list"}, {"data", data}}), v, ka);
  }
  if (data.empty()) {
    return ApiError(NotFound("model '" + only + "' is not served"), Dialect::kOpenAi, v, ka);
  }
  return JsonResponse(http::status::ok, DumpJson(data[0]), v, ka);
}

}  // namespace

HttpResponse OpenAiApi::Error(const Status& status, unsigned version, bool keep_alive) {
  return ApiError(status, Dialect::kOpenAi, version, keep_alive);
}

bool OpenAiApi::Owns(std::string_view target) {
  if (target.size() > 1 && target.back() == '/') target.remove_suffix(1);
  return target.starts_with("/v1/") || target == "/rerank" || target == "/reranking" ||
         target == "/embed" || target == "/tokenize" || target == "/detokenize" ||
         target == "/apply-template";
}

void OpenAiApi::Handle(HttpRequest request, const std::string& path, HttpReply reply,
                       HttpConnection connection) {
  std::string_view target = path;
  if (target.size() > 1 && target.back() == '/') target.remove_suffix(1);
  const unsigned v = request.version();
  const bool ka = request.keep_alive();
  // TEI's routes: /embed, and /rerank with a body in TEI's shape (`texts`), as llama-server
  // tells them apart. Known once the body is read; until then /rerank errors are OpenAI's.
  Dialect dialect = target == "/embed" ? Dialect::kTei : Dialect::kOpenAi;
  const bool models = target == "/v1/models" || target.starts_with("/v1/models/");
  const std::string_view allowed = models ? "GET" : "POST";
  if (request.method() != (models ? http::verb::get : http::verb::post)) {
    HttpResponse res = ApiError(InvalidArgument("use " + std::string(allowed) + " for " + path),
                                dialect, v, ka);
    res.result(http::status::method_not_allowed);
    return reply(std::move(res));
  }
  if (models) return reply(ListModels(service_, target, v, ka));

  auto parsed = ParseJsonObject(request.body(), "request body");
  if (!parsed.ok()) return reply(ApiError(parsed.status(), dialect, v, ka));
  const json body = std::move(*parsed);
  if ((target == "/rerank" || target == "/reranking") && body.contains("texts")) {
    dialect = Dialect::kTei;
  }
  const openai::Call call{.service = service_,
                          .body = body,
                          .target = target,
                          .version = v,
                          .keep_alive = ka,
                          .dialect = dialect,
                          .reply = std::move(reply),
                          .connection = std::move(connection)};
  if (target == "/v1/chat/completions" || target == "/v1/completions" ||
      target == "/apply-template") {
    return openai::HandleGeneration(call);
  }
  if (target == "/v1/embeddings" || target == "/embed") return openai::HandleEmbeddings(call);
  if (target == "/v1/rerank" || target == "/v1/reranking" || target == "/rerank" ||
      target == "/reranking") {
    return openai::HandleRerank(call);
  }
  if (target == "/tokenize") return openai::HandleTokenize(call);
  if (target == "/detokenize") return openai::HandleDetokenize(call);
  call.Fail(NotFound("no route for POST " + path));
}

}  // namespace mmserve
