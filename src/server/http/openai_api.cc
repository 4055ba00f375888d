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

// GET /v1/models[/{model}]: every served model (or `model`, when not empty) with its task and
// state; the one named with its details.
HttpResponse ListModels(const InferenceService& service, std::string_view model) {
  const std::string only(model);
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
    return JsonResponse(http::status::ok, DumpJson({{"object", "list"}, {"data", data}}));
  }
  if (data.empty()) {
    return ApiError(NotFound("model '" + only + "' is not served"), Dialect::kOpenAi);
  }
  return JsonResponse(http::status::ok, DumpJson(data[0]));
}

}  // namespace

HttpResponse OpenAiApi::Error(const Status& status, ErrorStyle style) {
  return ApiError(status, style == ErrorStyle::kTei ? Dialect::kTei : Dialect::kOpenAi);
}

void OpenAiApi::AddRoutes(RouteTable& table) {
  for (const char* pattern : {"/v1/models", "/v1/models/{}"}) {
    table.Add({.pattern = pattern,
               .methods = {http::verb::get},
               .errors = ErrorStyle::kOpenAi,
               .handler = [this](RouteCall& c) {
                 c.reply(ListModels(service_, c.args.empty() ? "" : c.args[0]));
               }});
  }
  const std::pair<const char*, Handler> kPosts[] = {
      {"/v1/chat/completions", openai::HandleGeneration},
      {"/v1/completions", openai::HandleGeneration},
      {"/apply-template", openai::HandleGeneration},
      {"/v1/embeddings", openai::HandleEmbeddings},
      {"/embed", openai::HandleEmbeddings},
      {"/v1/rerank", openai::HandleRerank},
      {"/v1/reranking", openai::HandleRerank},
      {"/rerank", openai::HandleRerank},
      {"/reranking", openai::HandleRerank},
      {"/tokenize", openai::HandleTokenize},
      {"/detokenize", openai::HandleDetokenize}};
  for (const auto& [pattern, handler] : kPosts) {
    // TEI's /embed answers in TEI's shape; /rerank does once its body shows TEI's `texts`.
    const ErrorStyle style =
        std::string_view(pattern) == "/embed" ? ErrorStyle::kTei : ErrorStyle::kOpenAi;
    table.Add({.pattern = pattern,
               .methods = {http::verb::post},
               .errors = style,
               .handler = [this, style, handler = handler, path = pattern](RouteCall& c) {
                 Post(c, path, style, handler);
               }});
  }
}

void OpenAiApi::Post(RouteCall& route, std::string_view target, ErrorStyle style,
                     Handler handler) {
  Dialect dialect = style == ErrorStyle::kTei ? Dialect::kTei : Dialect::kOpenAi;
  auto parsed = ParseJsonObject(route.request.body(), "request body");
  if (!parsed.ok()) return route.reply(ApiError(parsed.status(), dialect));
  const json body = std::move(*parsed);
  if ((target == "/rerank" || target == "/reranking") && body.contains("texts")) {
    dialect = Dialect::kTei;
  }
  const openai::Call call{.service = service_,
                          .body = body,
                          .target = target,
                          .dialect = dialect,
                          .reply = std::move(route.reply),
                          .connection = std::move(route.connection)};
  handler(call);
}

}  // namespace mmserve
