#include "server/http/http_router.h"

#include <charconv>
#include <regex>

#include <nlohmann/json.hpp>

#include "server/http/json_codec.h"
#include "server/http/status_mapping.h"

namespace mmserve {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;

constexpr const char* kVersion = "0.1.0";

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
  json out = {{"name", info.config.name},
              {"versions", {std::to_string(info.config.version)}},
              {"platform", info.signature.platform.empty() ? "mmserve_" + info.config.backend
                                                           : info.signature.platform},
              {"inputs", TensorSpecsToJson(info.signature.inputs)},
              {"outputs", TensorSpecsToJson(info.signature.outputs)},
              {"state", std::string(ModelStateName(info.state))}};
  if (!info.reason.empty() && info.state != ModelState::kReady) out["reason"] = info.reason;
  return out;
}

HttpResponse EmptyResponse(http::status code, unsigned version, bool keep_alive) {
  HttpResponse res(code, version);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

}  // namespace

HttpResponse HttpRouter::JsonResponse(http::status code, std::string body, unsigned version,
                                      bool keep_alive) {
  HttpResponse res(code, version);
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

HttpResponse HttpRouter::ErrorResponse(const Status& status, unsigned version, bool keep_alive) {
  json body = {{"error", std::string(status.message())}};
  return JsonResponse(HttpStatusFor(status.code()),
                      body.dump(-1, ' ', false, json::error_handler_t::replace), version,
                      keep_alive);
}

void HttpRouter::Handle(HttpRequest request, HttpReply reply, HttpConnection connection) {
  const unsigned v = request.version();
  const bool ka = request.keep_alive();
  std::string target(request.target());
  if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
  const bool is_get = request.method() == http::verb::get;
  const bool is_post = request.method() == http::verb::post;

  if (target == "/v2" || target == "/v2/") {
    if (!is_get) return reply(ErrorResponse(InvalidArgument("use GET for " + target), v, ka));
    json body = {{"name", "mmserve"},
                 {"version", kVersion},
                 {"extensions", {"binary_tensor_data"}}};
    return reply(JsonResponse(http::status::ok, body.dump(), v, ka));
  }
  if (target == "/v2/health/live") {
    return reply(EmptyResponse(http::status::ok, v, ka));
  }
  if (target == "/v2/health/ready") {
    return reply(EmptyResponse(service_.Ready() ? http::status::ok : http::status::bad_request,
                               v, ka));
  }
  // /v2/models/{name}[/versions/{version}][/ready|/infer]
  static const std::regex kModelRoute(
      R"(/v2/models/([^/]+)(?:/versions/([^/]+))?(?:/(ready|infer))?/?)");
  std::smatch m;
  if (std::regex_match(target, m, kModelRoute)) {
    int64_t version = 0;
    if (m[2].matched) {
      const std::string text = m[2].str();
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
      if (ec != std::errc() || end != text.data() + text.size() || version < 1) {
        return reply(ErrorResponse(
            InvalidArgument("model version: expected a positive integer, found '" + text + "'"),
            v, ka));
      }
    }
    const std::string action = m[3].matched ? m[3].str() : "";
    const bool want_post = action == "infer";
    if ((want_post && !is_post) || (!want_post && !is_get)) {
      HttpResponse res = ErrorResponse(
          InvalidArgument(std::string("use ") + (want_post ? "POST" : "GET") + " for " + target),
          v, ka);
      res.result(http::status::method_not_allowed);
      return reply(std::move(res));
    }
    if (action == "infer") {
      return HandleInfer(std::move(request), m[1].str(), version, reply, std::move(connection));
    }
    return HandleModel(request, m[1].str(), version, action, reply);
  }
  reply(ErrorResponse(NotFound("no route for " + std::string(request.method_string()) + " " +
                               target),
                      v, ka));
}

void HttpRouter::HandleModel(const HttpRequest& request, const std::string& name,
                             int64_t version, const std::string& action, HttpReply reply) {
  const unsigned v = request.version();
  const bool ka = request.keep_alive();
  auto info = service_.GetModel(name, version);
  if (!info.ok()) return reply(ErrorResponse(info.status(), v, ka));
  if (action == "ready") {
    const bool ready = info->state == ModelState::kReady && service_.accepting();
    return reply(EmptyResponse(ready ? http::status::ok : http::status::bad_request, v, ka));
  }
  reply(JsonResponse(http::status::ok, ModelMetadata(*info).dump(), v, ka));
}

void HttpRouter::HandleInfer(HttpRequest request, const std::string& name, int64_t version,
                             HttpReply reply, HttpConnection connection) {
  HttpPost post = connection.post;
  const unsigned v = request.version();
  const bool ka = request.keep_alive();
  std::optional<size_t> header_length;
  if (auto it = request.find("Inference-Header-Content-Length"); it != request.end()) {
    size_t n = 0;
    const auto text = it->value();
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return reply(ErrorResponse(
          InvalidArgument("Inference-Header-Content-Length: expected a byte count, found '" +
                          std::string(text) + "'"),
          v, ka));
    }
    header_length = n;
  }
  Result<ParsedInferRequest> parsed = InvalidArgument("unparsed");
  if (header_length == 0u) {
    auto info = service_.GetModel(name, version);
    if (!info.ok()) return reply(ErrorResponse(info.status(), v, ka));
    if (info->state != ModelState::kReady) {
      return reply(ErrorResponse(Unavailable("model '" + name + "' is not ready"), v, ka));
    }
    parsed = ParseRawInferRequest(std::move(request.body()), info->signature);
  } else {
    parsed = ParseInferRequest(request.body(), header_length);
  }
  if (!parsed.ok()) return reply(ErrorResponse(parsed.status(), v, ka));

  auto infer = std::make_unique<InferRequest>(std::move(parsed->request));
  infer->model_name = name;
  infer->model_version = version;
  ResponseContext ctx = std::move(parsed->response);
  ctx.model_name = name;
  // A per-request snapshot of the model would copy its whole config: ask for the version only.
  ctx.model_version = service_.ServedVersion(name);
  if (auto it = infer->parameters.find("stream"); it != infer->parameters.end()) {
    const bool* on = std::get_if<bool>(&it->second);
    if (!on) {
      return reply(
          ErrorResponse(InvalidArgument("parameters.stream: expected true or false"), v, ka));
    }
    if (*on) {
      return StreamInfer(std::move(infer), std::move(ctx), v, ka, std::move(post),
                         connection.open_stream());
    }
  }
  auto respond = [reply = std::move(reply), ctx = std::move(ctx), v,
                  ka](Result<InferResponse> result) {
    if (!result.ok()) return reply(ErrorResponse(result.status(), v, ka));
    EncodedResponse encoded = EncodeInferResponse(*result, ctx);
    HttpResponse res(http::status::ok, v);
    res.keep_alive(ka);
    if (encoded.header_length) {
      res.set(http::field::content_type, "application/octet-stream");
      res.set("Inference-Header-Content-Length", std::to_string(*encoded.header_length));
    } else {
      res.set(http::field::content_type, "application/json");
    }
    res.body() = std::move(encoded.body);
    res.prepare_payload();
    reply(std::move(res));
  };
  // A streaming backend asks after every piece whether to go on: stop when the client left.
  infer->on_partial = [gone = connection.client_gone](const InferResponse&) { return !gone(); };
  infer->done = [post = std::move(post), respond = std::move(respond)](
                    Result<InferResponse> result) mutable {
    post([respond = std::move(respond), result = std::move(result)]() mutable {
      respond(std::move(result));
    });
  };
  service_.Submit(std::move(infer));
}

void HttpRouter::StreamInfer(std::unique_ptr<InferRequest> infer, ResponseContext ctx,
                             unsigned version, bool keep_alive, HttpPost post,
                             std::shared_ptr<HttpStream> stream) {
  ctx.all_binary = false;  // events are JSON
  ctx.binary.clear();
  HttpResponse headers(http::status::ok, version);
  headers.set(http::field::content_type, "text/event-stream");
  headers.set(http::field::cache_control, "no-cache");
  headers.keep_alive(keep_alive);
  stream->Start(std::move(headers));
  auto event = [](const std::string& json_text) { return "data: " + json_text + "\n\n"; };
  infer->on_partial = [post, stream, ctx, event](const InferResponse& partial) {
    if (stream->broken()) return false;  // the client went away: cancel the generation
    post([stream, ctx, event, partial] {
      InferResponse marked = partial;
      marked.parameters["final"] = false;
      stream->Send(event(EncodeInferResponse(marked, ctx).body));
    });
    return true;
  };
  infer->done = [post, stream, ctx, event](Result<InferResponse> result) {
    post([stream, ctx, event, result = std::move(result)]() mutable {
      if (result.ok()) {
        result->parameters["final"] = true;
        stream->Send(event(EncodeInferResponse(*result, ctx).body));
      } else {
        stream->Send(event(json{{"error", std::string(result.status().message())}}.dump(
            -1, ' ', false, json::error_handler_t::replace)));
      }
      stream->End();
    });
  };
  service_.Submit(std::move(infer));
}

}  // namespace mmserve
