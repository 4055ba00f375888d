#include "server/http/http_router.h"

#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <nlohmann/json.hpp>

#include "backend/vision/image_header.h"
#include "common/json.h"
#include "server/http/json_codec.h"
#include "server/http/openai_api.h"
#include "server/http/stats_json.h"
#include "server/http/status_page.h"
#include "server/server_info.h"
#include "server/triton_config.h"

namespace mmserve {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;

json TensorSpecsToJson(const std::vector<TensorSpec>& specs) {
  json out = json::array();
  for (const auto& s : specs) {
    out.push_back({{"name", s.name},
                   {"datatype", std::string(DataTypeName(s.type))},
                   {"shape", s.shape}});
  }
  return out;
}

json ModelMetadata(const ModelInfo& info) {
  json versions = json::array();
  for (int64_t v : info.versions) versions.push_back(std::to_string(v));
  json out = {{"name", info.config.name},
              {"versions", versions},
              {"platform", PlatformOf(info)},
              {"inputs", TensorSpecsToJson(info.signature.inputs)},
              {"outputs", TensorSpecsToJson(info.signature.outputs)},
              {"state", std::string(ModelStateName(info.state))}};
  if (!info.reason.empty() && info.state != ModelState::kReady) out["reason"] = info.reason;
  if (!info.labels.empty()) out["labels"] = info.labels;
  return out;
}

json ReportToJson(const ReloadReport& r) {
  return {{"added", r.added},     {"reloaded", r.reloaded},       {"retired", r.retired},
          {"rerouted", r.rerouted}, {"kept", r.kept},             {"restart_needed", r.restart},
          {"unchanged", r.unchanged}};
}


// An image body (Content-Type: image/*) for `model`: a served format whose bytes agree with the
// type, and a model whose one input takes encoded images (BYTES: a `preprocess:` model).
Status CheckImageBody(const std::string& content_type, std::string_view body,
                      const ModelDescription& model) {
  const auto& inputs = model.signature.inputs;
  if (inputs.size() != 1 || inputs[0].type != DataType::kBytes) {
    return InvalidArgument("Content-Type " + content_type + ": model '" + model.config().name +
                           "' takes no single encoded image (a model with preprocess: takes "
                           "one, as its input IMAGE)");
  }
  const std::string type = content_type.substr(0, content_type.find(';'));
  static const std::map<std::string, ImageFormat> kTypes = {
      {"image/jpeg", ImageFormat::kJpeg}, {"image/jpg", ImageFormat::kJpeg},
      {"image/png", ImageFormat::kPng},   {"image/bmp", ImageFormat::kBmp},
      {"image/x-ms-bmp", ImageFormat::kBmp}, {"image/webp", ImageFormat::kWebp}};
  const std::string input = "input '" + inputs[0].name + "': ";
  auto it = kTypes.find(type);
  if (it == kTypes.end()) {
    return InvalidArgument(input + "Content-Type " + type +
                           " is not served (image/jpeg, image/png, image/bmp, image/webp)");
  }
  auto header = ReadImageHeader(body);
  if (!header.ok()) return InvalidArgument(input + std::string(header.status().message()));
  if (header->format != it->second) {
    return InvalidArgument(input + "Content-Type " + type + ", but the body is a " +
                           std::string(ImageFormatName(header->format)) + " image");
  }
  return Status::Ok();
}

// The Inference-Header-Content-Length header (the binary tensor extension): nullopt without it.
Result<std::optional<size_t>> InferenceHeaderLength(const HttpRequest& request) {
  auto it = request.find("Inference-Header-Content-Length");
  if (it == request.end()) return std::optional<size_t>();
  size_t n = 0;
  const auto text = it->value();
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument("Inference-Header-Content-Length: expected a byte count, found '" +
                           std::string(text) + "'");
  }
  return std::optional<size_t>(n);
}

// 200 with `response` encoded as the request asked: JSON, or JSON then binary tensors.
HttpResponse InferAnswer(const InferResponse& response, const ResponseContext& ctx) {
  EncodedResponse encoded = EncodeInferResponse(response, ctx);
  HttpResponse res(http::status::ok, 11);
  if (encoded.header_length) {
    res.set(http::field::content_type, "application/octet-stream");
    res.set("Inference-Header-Content-Length", std::to_string(*encoded.header_length));
  } else {
    res.set(http::field::content_type, "application/json");
  }
  res.body() = std::move(encoded.body);
  res.prepare_payload();
  return res;
}

// The request's Content-Type in lower case ("" without one).
std::string LowerContentType(const HttpRequest& request) {
  std::string type;
  if (auto it = request.find(http::field::content_type); it != request.end()) {
    type = std::string(it->value());
    for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return type;
}

}  // namespace

HttpRouter::HttpRouter(InferenceService& service, Options options)
    : service_(service),
      options_(std::move(options)),
      openai_(std::make_unique<OpenAiApi>(service)) {
  AddServerRoutes();
  AddModelRoutes();
  openai_->AddRoutes(routes_);
}

HttpRouter::~HttpRouter() = default;

namespace {

// `status` in the shape a route's errors take.
HttpResponse StyledError(const Status& status, ErrorStyle style) {
  return style == ErrorStyle::kKServe ? ErrorResponse(status) : OpenAiApi::Error(status, style);
}

}  // namespace

void HttpRouter::Add(std::string pattern, std::vector<http::verb> methods, Scope scope,
                     std::function<void(RouteCall&)> handler) {
  routes_.Add({.pattern = std::move(pattern),
               .methods = std::move(methods),
               .scope = scope,
               .handler = std::move(handler)});
}

void HttpRouter::AddServerRoutes() {
  using http::verb;
  // Probes: open to all, any method (load balancers differ).
  for (const char* health : {"/health", "/v1/health"}) {
    Add(health, {}, Scope::kOpen, [this](RouteCall& c) {
      const bool ready = service_.Ready();
      c.reply(JsonResponse(ready ? http::status::ok : http::status::service_unavailable,
                           DumpJson(json{{"status", ready ? "ok" : "not ready"}})));
    });
  }
  Add("/v2/health/live", {}, Scope::kOpen, [](RouteCall& c) {
    c.reply(EmptyResponse(http::status::ok));
  });
  Add("/v2/health/ready", {}, Scope::kOpen, [this](RouteCall& c) {
    c.reply(EmptyResponse(service_.Ready() ? http::status::ok : http::status::bad_request));
  });
  // The status page's files are open (the page asks for the key its data needs); its data is
  // behind the inference key.
  // StatusRoute is given the route's own path, whatever slashes the client doubled or added.
  auto status = [this](std::string pattern) {
    return [this, pattern = std::move(pattern)](RouteCall& c) {
      const std::string path = pattern == "/ui/*" ? "/ui/" + std::string(c.args[0]) : pattern;
      auto res = StatusRoute(c.request, path, service_, options_.access);
      c.reply(res ? std::move(*res)
                  : ErrorResponse(NotFound("no route for GET " + c.target)));
    };
  };
  for (const char* page : {"/", "/ui", "/ui/*"}) {
    Add(page, {verb::get}, Scope::kOpen, status(page));
  }
  for (const char* data : {"/v2/devices", "/v2/events"}) {
    Add(data, {verb::get}, Scope::kInference, status(data));
  }
  Add("/metrics", {verb::get}, Scope::kInference, [this](RouteCall& c) {
    HttpResponse res(http::status::ok, 11);
    res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    res.body() = PrometheusText(service_.ListModels(), options_.server_metrics
                                                          ? options_.server_metrics()
                                                          : ServerMetrics{});
    res.prepare_payload();
    c.reply(std::move(res));
  });
  Add("/v2", {verb::get}, Scope::kInference, [](RouteCall& c) {
    json extensions = json::array();
    for (auto e : kServerExtensions) extensions.push_back(e);
    json body = {{"name", kServerName}, {"version", kServerVersion}, {"extensions", extensions}};
    c.reply(JsonResponse(http::status::ok, DumpJson(body)));
  });
  Add("/v2/models/stats", {verb::get}, Scope::kInference, [this](RouteCall& c) {
    json stats = json::array();
    for (const auto& info : service_.ListModels()) stats.push_back(ModelStatsJson(info));
    c.reply(JsonResponse(http::status::ok, DumpJson(json{{"model_stats", stats}})));
  });
}

void HttpRouter::AddModelRoutes() {
  using http::verb;
  // /v2/models/{m}[/versions/{v} | /labels/{l}][/ready | /stats | /config | /infer]
  for (const char* by : {"", "/versions/{}", "/labels/{}"}) {
    const std::string model = std::string("/v2/models/{}") + by;
    const char kind = by[0] == '\0' ? 'n' : by[1];  // name only, versions, labels
    for (const char* action : {"", "ready", "stats", "config"}) {
      Add(model + (*action ? "/" : "") + action, {verb::get}, Scope::kInference,
          [this, kind, action = std::string(action)](RouteCall& c) {
            auto ref = RefOf(c, kind);
            if (!ref.ok()) return c.reply(ErrorResponse(ref.status()));
            HandleModel(c.request, *ref, action, std::move(c.reply));
          });
    }
    Add(model + "/infer", {verb::post}, Scope::kInference, [this, kind](RouteCall& c) {
      auto ref = RefOf(c, kind);
      if (!ref.ok()) return c.reply(ErrorResponse(ref.status()));
      HandleInfer(std::move(c.request), *ref, std::move(c.reply), std::move(c.connection));
    });
  }
  // The repository extension: the index is a read; changing the served set is admin.
  Add("/v2/repository/index", {verb::post}, Scope::kInference,
      [this](RouteCall& c) { HandleRepository(c, RepositoryOp::kIndex); });
  Add("/v2/repository/reload", {verb::post}, Scope::kAdmin,
      [this](RouteCall& c) { HandleRepository(c, RepositoryOp::kReload); });
  Add("/v2/repository/models/{}/load", {verb::post}, Scope::kAdmin,
      [this](RouteCall& c) { HandleRepository(c, RepositoryOp::kLoad); });
  Add("/v2/repository/models/{}/unload", {verb::post}, Scope::kAdmin,
      [this](RouteCall& c) { HandleRepository(c, RepositoryOp::kUnload); });
  Add("/v2/jobs/{}", {verb::get, verb::delete_}, Scope::kInference, [this](RouteCall& c) {
    const std::string_view id = c.args[0];
    if (id.find_first_not_of("0123456789abcdef") != std::string_view::npos) {
      return c.reply(ErrorResponse(NotFound("no job " + std::string(id))));
    }
    HandleJob(c.request, std::string(id), c.reply);
  });
}

Result<ModelRef> HttpRouter::RefOf(const RouteCall& call, char kind) {
  ModelRef ref{.name = call.args[0]};
  if (kind == 'l') ref.label = call.args[1];
  if (kind == 'v') {
    MMS_ASSIGN_OR_RETURN(ref.version, ParseVersion(call.args[1], "model version"));
  }
  return ref;
}

void HttpRouter::Handle(HttpRequest request, HttpReply reply, HttpConnection connection) {
  RouteCall call{.request = std::move(request),
                 .target = {},
                 .args = {},
                 .reply = std::move(reply),
                 .connection = std::move(connection)};
  call.target = std::string(call.request.target());
  if (auto q = call.target.find('?'); q != std::string::npos) call.target.resize(q);
  auto match = routes_.Find(call.target);
  // A path no route has: behind the inference key, in the shape its prefix's API uses.
  const ErrorStyle style = match ? match->route->errors
                           : call.target.starts_with("/v1/") ? ErrorStyle::kOpenAi
                                                             : ErrorStyle::kKServe;
  std::string_view authorization;
  if (auto it = call.request.find(http::field::authorization); it != call.request.end()) {
    authorization = std::string_view(it->value().data(), it->value().size());
  }
  const Scope scope = match ? match->route->scope : Scope::kInference;
  if (Status allowed = options_.access.Check(scope, authorization); !allowed.ok()) {
    HttpResponse res = StyledError(allowed, style);
    if (allowed.code() == StatusCode::kUnauthenticated) {
      res.set(http::field::www_authenticate, "Bearer");
    }
    return call.reply(std::move(res));
  }
  const std::string method(call.request.method_string());
  if (!match) {
    return call.reply(StyledError(NotFound("no route for " + method + " " + call.target), style));
  }
  const Route& route = *match->route;
  if (!route.methods.empty() && std::find(route.methods.begin(), route.methods.end(),
                                          call.request.method()) == route.methods.end()) {
    const std::string allowed = RouteTable::MethodsText(route);
    if (style == ErrorStyle::kKServe) {
      return call.reply(MethodNotAllowed(allowed, call.target));
    }
    HttpResponse res =
        StyledError(InvalidArgument("use " + allowed + " for " + call.target), style);
    res.result(http::status::method_not_allowed);
    return call.reply(std::move(res));
  }
  call.args = std::move(match->args);
  route.handler(call);
}

void HttpRouter::HandleModel(const HttpRequest& request, const ModelRef& ref,
                             const std::string& action, HttpReply reply) {
  auto info = service_.GetModel(std::string(ref.name), ref.version, std::string(ref.label));
  if (!info.ok()) return reply(ErrorResponse(info.status()));
  if (action == "ready") {
    const bool ready = info->state == ModelState::kReady && service_.accepting();
    return reply(EmptyResponse(ready ? http::status::ok : http::status::bad_request));
  }
  if (action == "config") {
    return reply(JsonResponse(http::status::ok, DumpJson(TritonModelConfig(*info))));
  }
  if (action == "stats") {
    return reply(JsonResponse(http::status::ok,
                              DumpJson(json{{"model_stats", {ModelStatsJson(*info)}}})));
  }
  reply(JsonResponse(http::status::ok, DumpJson(ModelMetadata(*info))));
}

void HttpRouter::HandleInfer(HttpRequest request, const ModelRef& ref, HttpReply reply,
                             HttpConnection connection) {
  const std::string name(ref.name);
  HttpDispatch dispatch = std::move(connection.dispatch);
  auto header_length = InferenceHeaderLength(request);
  if (!header_length.ok()) return reply(ErrorResponse(header_length.status()));
  // A body of raw bytes only: its layout is the model's one input, of the version that will
  // serve the request (routed once, here).
  std::optional<ModelDescription> raw_target;
  // Content-Type: image/*: the body is one encoded image for the model's one (image) input.
  const std::string content_type = LowerContentType(request);
  const bool image = content_type.starts_with("image/");
  Result<ParsedInferRequest> parsed = [&]() -> Result<ParsedInferRequest> {
    if (*header_length != 0u && !image) return ParseInferRequest(request.body(), *header_length);
    auto described = service_.Describe(ref);
    if (!described.ok()) return described.status();
    if (described->signature.inputs.empty()) {
      return Unavailable("model '" + name + "' is not ready");
    }
    if (image) MMS_RETURN_IF_ERROR(CheckImageBody(content_type, request.body(), *described));
    raw_target = *described;
    auto raw = ParseRawInferRequest(std::move(request.body()), described->signature);
    if (raw.ok() && image) raw->response.raw = false;  // a JSON answer, as to a JSON request
    return raw;
  }();
  if (!parsed.ok()) return reply(ErrorResponse(parsed.status()));

  auto infer = std::make_unique<InferRequest>(std::move(parsed->request));
  infer->route = connection.route;
  infer->trace_id = connection.request_id;
  infer->model_name = name;
  infer->model_version = ref.version;
  infer->model_label = std::string(ref.label);
  ResponseContext ctx = std::move(parsed->response);
  ctx.model_name = name;
  ctx.model_version = ref.version;  // the response carries the version that served it
  bool async = false;
  if (auto it = request.find("Prefer"); it != request.end()) {
    async = it->value().find("respond-async") != boost::beast::string_view::npos;
  }
  if (auto it = infer->parameters.find("async"); it != infer->parameters.end()) {
    const bool* on = std::get_if<bool>(&it->second);
    if (!on) {
      return reply(
          ErrorResponse(InvalidArgument("parameters.async: expected true or false")));
    }
    async = async || *on;
    infer->parameters.erase(it);
  }
  if (async) return StartJob(std::move(infer), ctx.model_version, reply);
  if (auto it = infer->parameters.find("stream"); it != infer->parameters.end()) {
    const bool* on = std::get_if<bool>(&it->second);
    if (!on) {
      return reply(
          ErrorResponse(InvalidArgument("parameters.stream: expected true or false")));
    }
    if (*on) {
      return StreamInfer(std::move(infer), std::move(ctx), std::move(dispatch),
                         connection.open_stream());
    }
  }
  auto respond = [reply = std::move(reply), ctx = std::move(ctx)](Result<InferResponse> result) {
    if (!result.ok()) return reply(ErrorResponse(result.status()));
    reply(InferAnswer(*result, ctx));
  };
  // A client that leaves cancels the request: dropped while queued, stopped while generating.
  infer->cancelled = std::move(connection.client_gone);
  infer->done = [answer = std::move(connection.answer), respond = std::move(respond)](
                    Result<InferResponse> result) mutable {
    answer([respond = std::move(respond), result = std::move(result)]() mutable {
      respond(std::move(result));
    });
  };
  if (raw_target) return service_.Submit(*raw_target, std::move(infer));
  service_.Submit(std::move(infer));
}

void HttpRouter::HandleRepository(RouteCall& call, RepositoryOp op) {
  const HttpReply& reply = call.reply;
  json body = json::object();
  if (!call.request.body().empty()) {
    auto parsed = ParseJsonObject(call.request.body(), "request body");
    if (!parsed.ok()) return reply(ErrorResponse(parsed.status()));
    body = std::move(*parsed);
  }
  // The change runs on the service's loader thread; its answer comes back to this strand.
  auto answer = [dispatch = call.connection.dispatch, reply](const Result<ReloadReport>& result) {
    dispatch([reply, result] {
      if (!result.ok()) return reply(ErrorResponse(result.status()));
      reply(JsonResponse(http::status::ok, DumpJson(ReportToJson(*result))));
    });
  };
  if (op == RepositoryOp::kIndex) {
    bool ready_only = false;
    if (body.contains("ready")) {
      if (!body["ready"].is_boolean()) {
        return reply(ErrorResponse(InvalidArgument("ready: expected true or false")));
      }
      ready_only = body["ready"].get<bool>();
    }
    json index = json::array();
    for (const auto& info : service_.ListModels()) {
      if (ready_only && info.state != ModelState::kReady) continue;
      json item = {{"name", info.config.name},
                   {"version", std::to_string(info.config.version)},
                   {"state", std::string(ModelStateName(info.state))}};
      if (!info.reason.empty() && info.state != ModelState::kReady) item["reason"] = info.reason;
      index.push_back(std::move(item));
    }
    return reply(JsonResponse(http::status::ok, DumpJson(index)));
  }
  if (op == RepositoryOp::kReload) return service_.Reload(std::move(answer));
  const std::string name(call.args[0]);
  if (op == RepositoryOp::kUnload) return service_.UnloadModel(name, std::move(answer));
  // Triton's load: parameters.config is the model's configuration (here: a model entry as
  // under `models:` in the YAML), as a JSON object or a string holding one.
  std::optional<json> entry;
  if (body.contains("parameters")) {
    const json& params = body["parameters"];
    if (!params.is_object()) {
      return reply(ErrorResponse(InvalidArgument("parameters: expected an object")));
    }
    if (params.contains("config")) {
      entry = params["config"];
      if (entry->is_string()) {
        JsonError error;
        entry = ParseJson(entry->get<std::string>(), &error);
        if (entry->is_discarded()) {
          return reply(ErrorResponse(
              InvalidArgument("parameters.config: expected a JSON model entry, found text that " +
                              DescribeJsonError(error))));
        }
      }
    }
  }
  service_.LoadModel(name, std::move(entry), std::move(answer));
}

void HttpRouter::StartJob(std::unique_ptr<InferRequest> infer, int64_t model_version,
                          const HttpReply& reply) {
  auto id = service_.jobs().Start(*infer, model_version);
  if (!id.ok()) return reply(ErrorResponse(id.status()));
  const std::string url = "/v2/jobs/" + *id;
  json body = {{"id", *id},
               {"model_name", infer->model_name},
               {"status", std::string(JobStateName(JobState::kPending))},
               {"url", url}};
  service_.Submit(std::move(infer));
  HttpResponse res = JsonResponse(http::status::accepted, DumpJson(body));
  res.set(http::field::location, url);
  reply(std::move(res));
}

void HttpRouter::HandleJob(const HttpRequest& request, const std::string& id,
                           const HttpReply& reply) {
  if (request.method() == http::verb::delete_) {
    auto state = service_.jobs().Cancel(id);
    if (!state.ok()) return reply(ErrorResponse(state.status()));
    json body = {{"id", id}, {"status", std::string(JobStateName(*state))}};
    if (*state != JobState::kCancelled) body["deleted"] = true;
    return reply(JsonResponse(http::status::ok, DumpJson(body)));
  }
  if (request.method() != http::verb::get) {
    return reply(MethodNotAllowed("GET or DELETE", "a job"));
  }
  auto job = service_.jobs().Get(id);
  if (!job.ok()) return reply(ErrorResponse(job.status()));
  json head = {{"id", job->id},
               {"model_name", job->model},
               {"model_version", std::to_string(job->model_version)},
               {"status", std::string(JobStateName(job->state))},
               {"age_ms", job->age.count()}};
  if (job->state != JobState::kPending) head["run_time_ms"] = job->run_time.count();
  std::string body = DumpJson(head);
  if (job->result && job->result->ok()) {
    // The result is the infer response the request would have had, in JSON.
    ResponseContext ctx{.model_name = job->model, .model_version = job->model_version,
                        .id = job->request_id};
    body.pop_back();
    body += ",\"result\":" + EncodeInferResponse(**job->result, ctx).body + "}";
  } else if (job->result) {
    const Status& s = job->result->status();
    head["error"] = std::string(s.message());
    head["error_code"] = static_cast<int>(HttpStatusFor(s.code()));
    body = DumpJson(head);
  }
  reply(JsonResponse(http::status::ok, std::move(body)));
}

void HttpRouter::StreamInfer(std::unique_ptr<InferRequest> infer, ResponseContext ctx,
                             HttpDispatch dispatch, std::shared_ptr<HttpStream> stream) {
  ctx.all_binary = false;  // events are JSON
  ctx.binary.clear();
  HttpResponse headers(http::status::ok, 11);
  headers.set(http::field::content_type, "text/event-stream");
  headers.set(http::field::cache_control, "no-cache");
  stream->Start(std::move(headers));
  auto event = [](const std::string& json_text) { return "data: " + json_text + "\n\n"; };
  infer->on_partial = [dispatch, stream, ctx, event](const InferResponse& partial) {
    if (stream->broken()) return false;  // the client went away: cancel the generation
    dispatch([stream, ctx, event, partial] {
      InferResponse marked = partial;
      marked.parameters["final"] = false;
      stream->Send(event(EncodeInferResponse(marked, ctx).body));
    });
    return true;
  };
  infer->done = [dispatch, stream, ctx, event](Result<InferResponse> result) {
    dispatch([stream, ctx, event, result = std::move(result)]() mutable {
      if (result.ok()) {
        result->parameters["final"] = true;
        stream->Send(event(EncodeInferResponse(*result, ctx).body));
      } else {
        stream->Send(event(DumpJson(json{{"error", std::string(result.status().message())}})));
      }
      stream->End();
    });
  };
  service_.Submit(std::move(infer));
}

}  // namespace mmserve
