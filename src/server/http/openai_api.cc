#include "server/http/openai_api.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/strings.h"
#include "server/http/status_mapping.h"

namespace mmserve {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;

// An error about one field of the body: the message starts with the field's path, which the
// error response also gives as `param`.
Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument(field + ": " + what);
}

std::string Found(const json& value) { return "found " + QuoteJson(value); }

// The field a message names ("messages[0].role: ..."), or "".
std::string ParamOf(std::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos || colon == 0) return {};
  const std::string_view field = message.substr(0, colon);
  if (field.find(' ') != std::string_view::npos) return {};
  return std::string(field);
}

enum class Dialect { kOpenAi, kTei };

std::string ErrorType(http::status code) {
  switch (code) {
    case http::status::bad_request: return "invalid_request_error";
    case http::status::unauthorized: return "authentication_error";
    case http::status::forbidden: return "permission_error";
    case http::status::not_found: return "not_found_error";
    case http::status::payload_too_large: return "invalid_request_error";
    case http::status::too_many_requests: return "rate_limit_error";
    case http::status::service_unavailable: return "unavailable_error";
    case http::status::gateway_timeout: return "timeout_error";
    case http::status::not_implemented: return "not_supported_error";
    default: return "server_error";
  }
}

// TEI's error_type values.
std::string TeiErrorType(http::status code) {
  switch (code) {
    case http::status::bad_request:
    case http::status::not_found: return "Validation";
    case http::status::too_many_requests: return "Overloaded";
    case http::status::service_unavailable: return "Unhealthy";
    default: return "Backend";
  }
}

HttpResponse ApiError(const Status& status, Dialect dialect, unsigned v, bool ka) {
  const http::status code = HttpStatusFor(status.code());
  const std::string message(status.message());
  json body;
  if (dialect == Dialect::kTei) {
    body = {{"error", message}, {"error_type", TeiErrorType(code)}};
  } else {
    const std::string param = ParamOf(message);
    body = {{"error",
             {{"message", message},
              {"type", ErrorType(code)},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", static_cast<int>(code)}}}};
  }
  HttpResponse res = HttpRouter::JsonResponse(code, DumpJson(body), v, ka);
  HttpRouter::MarkRetryable(res);
  return res;
}

// Whether `object` has the string member `key` equal to `expected`. A member of another type is
// simply not equal (json::value() would throw on it).
bool MemberEquals(const json& object, const char* key, std::string_view expected) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() && it->get_ref<const std::string&>() == expected;
}

// A body field: absent when missing or null (clients send null for "not set").
const json* Field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

Status ReadNumber(const json& body, const char* key, double lo, double hi,
                  std::optional<double>& out) {
  const json* f = Field(body, key);
  if (!f) return Status::Ok();
  if (!f->is_number() || f->get<double>() < lo || f->get<double>() > hi) {
    std::ostringstream range;
    range << "expected a number from " << lo << " to " << hi << ", " << Found(*f);
    return FieldError(key, range.str());
  }
  out = f->get<double>();
  return Status::Ok();
}

Status ReadInt(const json& body, const char* key, int64_t lo, int64_t hi,
               std::optional<int64_t>& out) {
  const json* f = Field(body, key);
  if (!f) return Status::Ok();
  if (!f->is_number_integer() || f->get<int64_t>() < lo || f->get<int64_t>() > hi) {
    return FieldError(key, "expected an integer from " + std::to_string(lo) + " to " +
                               std::to_string(hi) + ", " + Found(*f));
  }
  out = f->get<int64_t>();
  return Status::Ok();
}

Status ReadBool(const json& body, const char* key, std::optional<bool>& out) {
  const json* f = Field(body, key);
  if (!f) return Status::Ok();
  if (!f->is_boolean()) return FieldError(key, "expected true or false, " + Found(*f));
  out = f->get<bool>();
  return Status::Ok();
}

Tensor StringsTensor(std::string name, const std::vector<std::string>& items) {
  std::string data;
  for (const auto& s : items) Tensor::AppendBytesElement(data, s);
  return Tensor(std::move(name), DataType::kBytes, Shape{static_cast<int64_t>(items.size())},
                std::move(data));
}

const Tensor* Output(const InferResponse& response, const std::string& name) {
  for (const auto& t : response.outputs) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

std::string FirstText(const InferResponse& response) {
  const Tensor* t = Output(response, "TEXT");
  if (!t) return {};
  const auto items = t->BytesElements();
  return items.empty() ? std::string() : std::string(items[0]);
}

std::span<const float> Floats(const Tensor& t) {
  return {reinterpret_cast<const float*>(t.data().data()), t.data().size() / sizeof(float)};
}

int64_t Unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string RandomId(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + hex;
}

// The model `body.model` names, which must serve `task`; without a name, the only model that
// serves it.
Result<ModelInfo> ResolveModel(const InferenceService& service, const json& body,
                               const std::string& task, std::string_view route) {
  if (const json* model = Field(body, "model")) {
    if (!model->is_string() || model->get<std::string>().empty()) {
      return FieldError("model", "expected a model name, " + Found(*model));
    }
    const std::string name = model->get<std::string>();
    auto info = service.GetModel(name);
    if (!info.ok()) return NotFound("model: " + std::string(info.status().message()));
    if (info->config.task != task) {
      return FieldError("model", "'" + name + "' serves task " + info->config.task + "; " +
                                     std::string(route) + " needs a " + task + " model");
    }
    return info;
  }
  std::vector<std::string> names;
  for (const auto& info : service.ListModels()) {
    if (info.config.task == task &&
        std::find(names.begin(), names.end(), info.config.name) == names.end()) {
      names.push_back(info.config.name);
    }
  }
  if (names.empty()) return NotFound("model: no " + task + " model is served");
  if (names.size() > 1) {
    return FieldError("model", "required: several " + task + " models are served (" +
                                   Join(names, ", ") + ")");
  }
  return service.GetModel(names[0]);
}

std::unique_ptr<InferRequest> NewRequest(const ModelInfo& model) {
  auto r = std::make_unique<InferRequest>();
  r->model_name = model.config.name;
  return r;
}

// Scheduling extensions every route takes: priority (a level) and timeout_ms.
Status ReadScheduling(const json& body, InferRequest& r) {
  std::optional<int64_t> priority, timeout_ms;
  MMS_RETURN_IF_ERROR(ReadInt(body, "priority", 1, kMaxPriorityLevel, priority));
  MMS_RETURN_IF_ERROR(ReadInt(body, "timeout_ms", 1, int64_t{1} << 40, timeout_ms));
  if (priority) r.parameters["priority"] = *priority;
  if (timeout_ms) r.parameters["timeout"] = *timeout_ms * 1000;  // the service's unit: µs
  return Status::Ok();
}

// Submits `r`; `on_strand` gets the outcome on the connection's strand. A client that leaves
// cancels the request (queued: dropped; generating: stopped).
void SubmitRequest(InferenceService& service, std::unique_ptr<InferRequest> r,
                   const HttpConnection& c, std::function<void(Result<InferResponse>)> on_strand) {
  r->cancelled = c.client_gone;
  r->done = [dispatch = c.dispatch, f = std::move(on_strand)](Result<InferResponse> result) {
    dispatch([f, result = std::move(result)]() mutable { f(std::move(result)); });
  };
  service.Submit(std::move(r));
}

// What a generation request asks for beyond its prompt.
struct GenerationOptions {
  bool stream = false;
  bool include_usage = false;
};

Status ReadGeneration(const json& body, InferRequest& r, GenerationOptions& g) {
  std::optional<int64_t> max_tokens, max_completion_tokens, n, seed, top_k;
  std::optional<double> temperature, top_p, min_p, repeat_penalty, frequency, presence;
  MMS_RETURN_IF_ERROR(ReadInt(body, "max_tokens", 1, 1 << 20, max_tokens));
  MMS_RETURN_IF_ERROR(ReadInt(body, "max_completion_tokens", 1, 1 << 20, max_completion_tokens));
  MMS_RETURN_IF_ERROR(ReadInt(body, "n", 1, 128, n));
  MMS_RETURN_IF_ERROR(ReadInt(body, "seed", INT64_MIN, INT64_MAX, seed));
  MMS_RETURN_IF_ERROR(ReadInt(body, "top_k", 0, 1 << 20, top_k));
  MMS_RETURN_IF_ERROR(ReadNumber(body, "temperature", 0, 2, temperature));
  MMS_RETURN_IF_ERROR(ReadNumber(body, "top_p", 0, 1, top_p));
  MMS_RETURN_IF_ERROR(ReadNumber(body, "min_p", 0, 1, min_p));
  MMS_RETURN_IF_ERROR(ReadNumber(body, "repeat_penalty", 0.01, 10, repeat_penalty));
  MMS_RETURN_IF_ERROR(ReadNumber(body, "frequency_penalty", -2, 2, frequency));
  MMS_RETURN_IF_ERROR(ReadNumber(body, "presence_penalty", -2, 2, presence));
  if (n && *n != 1) return FieldError("n", "only 1 choice per request is supported");
  if (frequency && *frequency != 0) {
    return FieldError("frequency_penalty", "not supported; use repeat_penalty");
  }
  if (presence && *presence != 0) {
    return FieldError("presence_penalty", "not supported; use repeat_penalty");
  }
  std::optional<bool> logprobs;
  MMS_RETURN_IF_ERROR(ReadBool(body, "logprobs", logprobs));
  if (logprobs.value_or(false) || Field(body, "top_logprobs")) {
    return FieldError("logprobs", "log probabilities are not supported");
  }
  if (const json* tools = Field(body, "tools"); tools && !tools->empty()) {
    return FieldError("tools", "tool calls are not supported");
  }
  if (const json* format = Field(body, "response_format")) {
    if (!format->is_object() || !MemberEquals(*format, "type", "text")) {
      return FieldError("response_format", "only {\"type\": \"text\"} is supported");
    }
  }
  if (const json* bias = Field(body, "logit_bias"); bias && !bias->empty()) {
    return FieldError("logit_bias", "not supported");
  }
  if (max_completion_tokens) max_tokens = max_completion_tokens;
  if (max_tokens) r.parameters["max_tokens"] = *max_tokens;
  // OpenAI's defaults: temperature 1, top_p 1.
  r.parameters["temperature"] = temperature.value_or(1.0);
  if (top_p) {
    if (*top_p == 0) return FieldError("top_p", "expected a number above 0, found 0");
    r.parameters["top_p"] = *top_p;
  }
  if (min_p) r.parameters["min_p"] = *min_p;
  if (top_k) r.parameters["top_k"] = *top_k;
  if (repeat_penalty) r.parameters["repeat_penalty"] = *repeat_penalty;
  if (seed) r.parameters["seed"] = static_cast<int64_t>(static_cast<uint32_t>(*seed));
  if (const json* stop = Field(body, "stop")) {
    std::vector<std::string> stops;
    if (stop->is_string()) {
      stops.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= 16) {
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string()) {
          return FieldError("stop[" + std::to_string(i) + "]", "expected a string, " +
                                                                   Found((*stop)[i]));
        }
        stops.push_back((*stop)[i].get<std::string>());
      }
    } else {
      return FieldError("stop", "expected a string or a list of at most 16 strings, " +
                                    Found(*stop));
    }
    if (!stops.empty()) r.inputs.push_back(StringsTensor("STOP", stops));
  }
  std::optional<bool> stream;
  MMS_RETURN_IF_ERROR(ReadBool(body, "stream", stream));
  g.stream = stream.value_or(false);
  if (const json* options = Field(body, "stream_options")) {
    if (!options->is_object()) {
      return FieldError("stream_options", "expected an object, " + Found(*options));
    }
    std::optional<bool> usage;
    if (Status s = ReadBool(*options, "include_usage", usage); !s.ok()) {
      return InvalidArgument("stream_options." + std::string(s.message()));
    }
    g.include_usage = usage.value_or(false);
  }
  return ReadScheduling(body, r);
}

Status ReadMessages(const json& body, InferRequest& r) {
  const json* messages = Field(body, "messages");
  if (!messages) return FieldError("messages", "required");
  if (!messages->is_array() || messages->empty()) {
    return FieldError("messages", "expected a non-empty list of messages, " + Found(*messages));
  }
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  std::vector<std::string> roles, contents;
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& m = (*messages)[i];
    if (!m.is_object()) return FieldError(at, "expected a message object, " + Found(m));
    const json* role = Field(m, "role");
    if (!role || !role->is_string() || !kRoles.contains(role->get<std::string>())) {
      return FieldError(at + ".role", "expected system, developer, user, assistant or tool, " +
                                          (role ? Found(*role) : std::string("found nothing")));
    }
    std::string text;
    if (const json* content = Field(m, "content")) {
      if (content->is_string()) {
        text = content->get<std::string>();
      } else if (content->is_array()) {
        for (size_t p = 0; p < content->size(); ++p) {
          const json& part = (*content)[p];
          const std::string where = at + ".content[" + std::to_string(p) + "]";
          if (!part.is_object() || !MemberEquals(part, "type", "text") ||
              !part.contains("text") || !part["text"].is_string()) {
            return FieldError(where, "only {\"type\": \"text\", \"text\": ...} parts are "
                                     "supported, " + Found(part));
          }
          if (!text.empty()) text += "\n";
          text += part["text"].get<std::string>();
        }
      } else {
        return FieldError(at + ".content", "expected a string or a list of text parts, " +
                                               Found(*content));
      }
    } else if (role->get<std::string>() != "assistant") {
      return FieldError(at + ".content", "required");
    }
    roles.push_back(role->get<std::string>() == "developer" ? "system" : role->get<std::string>());
    contents.push_back(std::move(text));
  }
  r.inputs.push_back(StringsTensor("ROLES", roles));
  r.inputs.push_back(StringsTensor("CONTENTS", contents));
  return Status::Ok();
}

json Usage(int64_t prompt, int64_t completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

// One generation answered as a chat completion or a text completion, streamed or not.
struct Generation {
  bool chat = true;
  std::string id;
  int64_t created = 0;
  std::string model;

  json Head(const char* object) const {
    return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
  }
  json Choice(int index, const std::string& text, const json& finish_reason) const {
    json c = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
    if (chat) {
      c["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      c["text"] = text;
    }
    return c;
  }
  // A streamed piece: chat deltas carry the role first, then content.
  json Chunk(const std::string& text, bool first, const json& finish_reason) const {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
    if (chat) {
      json delta = json::object();
      if (first) delta["role"] = "assistant";
      if (!text.empty() || first) delta["content"] = text;
      choice["delta"] = delta;
    } else {
      choice["text"] = text;
    }
    json out = Head(chat ? "chat.completion.chunk" : "text_completion");
    out["choices"] = json::array({choice});
    return out;
  }
};

std::string Event(const json& data) { return "data: " + DumpJson(data) + "\n\n"; }

// The streaming side of one generation, on the connection's strand. The response starts with
// the first piece, so a request refused before any output gets a plain HTTP error.
struct GenerationStream {
  Generation gen;
  bool include_usage = false;
  std::shared_ptr<HttpStream> stream;
  HttpReply reply;
  unsigned version = 11;
  bool keep_alive = true;
  bool started = false;
  size_t sent = 0;  // bytes of the text streamed so far

  void StartIfNeeded() {
    if (started) return;
    started = true;
    HttpResponse headers(http::status::ok, version);
    headers.set(http::field::content_type, "text/event-stream");
    headers.set(http::field::cache_control, "no-cache");
    headers.keep_alive(keep_alive);
    stream->Start(std::move(headers));
    if (gen.chat) stream->Send(Event(gen.Chunk("", /*first=*/true, nullptr)));
  }
  void Piece(const std::string& text) {
    StartIfNeeded();
    sent += text.size();
    stream->Send(Event(gen.Chunk(text, false, nullptr)));
  }
  void Done(Result<InferResponse> result) {
    if (!result.ok() && !started) {
      return reply(ApiError(result.status(), Dialect::kOpenAi, version, keep_alive));
    }
    StartIfNeeded();
    if (!result.ok()) {
      const Status& s = result.status();
      const std::string message(s.message());
      stream->Send(Event({{"error",
                           {{"message", message},
                            {"type", ErrorType(HttpStatusFor(s.code()))},
                            {"code", static_cast<int>(HttpStatusFor(s.code()))}}}}));
    } else {
      const std::string text = FirstText(*result);
      if (text.size() > sent) stream->Send(Event(gen.Chunk(text.substr(sent), false, nullptr)));
      const std::string reason = StringParam(result->parameters, "finish_reason");
      stream->Send(Event(gen.Chunk("", false, reason.empty() ? "stop" : reason)));
      if (include_usage) {
        json usage = gen.Head(gen.chat ? "chat.completion.chunk" : "text_completion");
        usage["choices"] = json::array();
        usage["usage"] = Usage(NumberParam<int64_t>(result->parameters, "prompt_tokens", 0),
                               NumberParam<int64_t>(result->parameters, "completion_tokens", 0));
        stream->Send(Event(usage));
      }
    }
    stream->Send("data: [DONE]\n\n");
    stream->End();
  }
};

void StreamGeneration(InferenceService& service, std::unique_ptr<InferRequest> r,
                      std::shared_ptr<GenerationStream> state, const HttpConnection& c) {
  r->on_partial = [state, dispatch = c.dispatch](const InferResponse& partial) {
    if (state->stream->broken()) return false;  // the client went away: stop generating
    dispatch([state, piece = FirstText(partial)] { state->Piece(piece); });
    return true;
  };
  SubmitRequest(service, std::move(r), c,
                [state](Result<InferResponse> result) { state->Done(std::move(result)); });
}

}  // namespace

HttpResponse OpenAiApi::Error(const Status& status, unsigned version, bool keep_alive) {
  return ApiError(status, Dialect::kOpenAi, version, keep_alive);
}

bool OpenAiApi::Owns(std::string_view target) {
  if (target.size() > 1 && target.back() == '/') target.remove_suffix(1);
  return target.starts_with("/v1/") || target == "/rerank" || target == "/reranking" ||
         target == "/embed";
}

void OpenAiApi::Handle(HttpRequest request, const std::string& path, HttpReply reply,
                       HttpConnection connection) {
  std::string_view target = path;
  if (target.size() > 1 && target.back() == '/') target.remove_suffix(1);
  const unsigned v = request.version();
  const bool ka = request.keep_alive();
  // TEI's routes: /embed, and /rerank with a body in TEI's shape (`texts`), as llama-server
  // tells them apart. Known once the body is read; until then /rerank errors are OpenAI's.
  bool tei = target == "/embed";
  Dialect dialect = tei ? Dialect::kTei : Dialect::kOpenAi;
  auto fail = [&](const Status& s) { reply(ApiError(s, dialect, v, ka)); };
  auto wrong_method = [&](const char* allowed) {
    HttpResponse res =
        ApiError(InvalidArgument("use " + std::string(allowed) + " for " + path), dialect, v, ka);
    res.result(http::status::method_not_allowed);
    reply(std::move(res));
  };

  if (target == "/v1/models" || target.starts_with("/v1/models/")) {
    if (request.method() != http::verb::get) return wrong_method("GET");
    const std::string only =
        target.size() > 11 ? std::string(target.substr(11)) : std::string();
    json data = json::array();
    std::set<std::string> seen;
    for (const auto& info : service_.ListModels()) {
      if (!only.empty() && info.config.name != only) continue;
      if (!seen.insert(info.config.name).second) continue;
      auto current = service_.GetModel(info.config.name);
      json versions = json::array();
      for (int64_t ver : info.versions) versions.push_back(std::to_string(ver));
      data.push_back({{"id", info.config.name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "mmserve"},
                      {"task", info.config.task},
                      {"backend", info.config.backend},
                      {"versions", versions},
                      {"state", std::string(ModelStateName(
                                    current.ok() ? current->state : info.state))}});
    }
    if (!only.empty()) {
      if (data.empty()) return fail(NotFound("model '" + only + "' is not served"));
      return reply(HttpRouter::JsonResponse(http::status::ok, DumpJson(data[0]), v, ka));
    }
    return reply(HttpRouter::JsonResponse(
        http::status::ok, DumpJson({{"object", "list"}, {"data", data}}), v, ka));
  }

  if (request.method() != http::verb::post) return wrong_method("POST");
  auto parsed = ParseJsonObject(request.body(), "request body");
  if (!parsed.ok()) return fail(parsed.status());
  const json body = std::move(*parsed);
  if ((target == "/rerank" || target == "/reranking") && body.contains("texts")) {
    tei = true;
    dialect = Dialect::kTei;
  }

  if (target == "/v1/chat/completions" || target == "/v1/completions") {
    const bool chat = target == "/v1/chat/completions";
    auto model = ResolveModel(service_, body, "generate", target);
    if (!model.ok()) return fail(model.status());
    Generation gen{.chat = chat,
                   .id = RandomId(chat ? "chatcmpl-" : "cmpl-"),
                   .created = Unix(),
                   .model = model->config.name};
    GenerationOptions options;
    std::vector<std::unique_ptr<InferRequest>> requests;
    std::vector<std::string> prompts;
    if (!chat) {
      const json* prompt = Field(body, "prompt");
      if (!prompt) return fail(FieldError("prompt", "required"));
      if (prompt->is_string()) {
        prompts.push_back(prompt->get<std::string>());
      } else if (prompt->is_array() && !prompt->empty() &&
                 std::all_of(prompt->begin(), prompt->end(),
                             [](const json& p) { return p.is_string(); })) {
        for (const auto& p : *prompt) prompts.push_back(p.get<std::string>());
      } else {
        return fail(FieldError("prompt", "expected a string or a non-empty list of strings "
                                         "(token ids are not supported here), " +
                                             Found(*prompt)));
      }
      if (const json* echo = Field(body, "echo"); echo && *echo != false) {
        return fail(FieldError("echo", "not supported"));
      }
      if (const json* suffix = Field(body, "suffix"); suffix && *suffix != "") {
        return fail(FieldError("suffix", "not supported"));
      }
    }
    const size_t count = chat ? 1 : prompts.size();
    for (size_t i = 0; i < count; ++i) {
      auto r = NewRequest(*model);
      if (chat) {
        if (Status s = ReadMessages(body, *r); !s.ok()) return fail(s);
      } else {
        r->inputs.push_back(StringsTensor("PROMPT", {prompts[i]}));
      }
      if (Status s = ReadGeneration(body, *r, options); !s.ok()) return fail(s);
      requests.push_back(std::move(r));
    }
    if (options.stream) {
      if (requests.size() != 1) {
        return fail(FieldError("prompt", "a streamed completion takes one prompt"));
      }
      auto state = std::make_shared<GenerationStream>();
      state->gen = gen;
      state->include_usage = options.include_usage;
      state->stream = connection.open_stream();
      state->reply = reply;
      state->version = v;
      state->keep_alive = ka;
      return StreamGeneration(service_, std::move(requests[0]), std::move(state), connection);
    }
    // Every prompt is its own request (the generator batches them); the answer waits for all.
    struct Gather {
      std::vector<std::optional<Result<InferResponse>>> results;
      size_t pending = 0;
    };
    auto gather = std::make_shared<Gather>();
    gather->results.resize(requests.size());
    gather->pending = requests.size();
    for (size_t i = 0; i < requests.size(); ++i) {
      SubmitRequest(service_, std::move(requests[i]), connection,
                    [gather, i, gen, reply, v, ka](Result<InferResponse> result) {
                      gather->results[i] = std::move(result);
                      if (--gather->pending > 0) return;
                      json choices = json::array();
                      int64_t prompt_tokens = 0, completion_tokens = 0;
                      for (size_t k = 0; k < gather->results.size(); ++k) {
                        const auto& res = *gather->results[k];
                        if (!res.ok()) {
                          return reply(ApiError(res.status(), Dialect::kOpenAi, v, ka));
                        }
                        prompt_tokens += NumberParam<int64_t>(res->parameters, "prompt_tokens", 0);
                        completion_tokens +=
                            NumberParam<int64_t>(res->parameters, "completion_tokens", 0);
                        const std::string reason = StringParam(res->parameters, "finish_reason");
                        choices.push_back(gen.Choice(static_cast<int>(k), FirstText(*res),
                                                     reason.empty() ? "stop" : reason));
                      }
                      json out = gen.Head(gen.chat ? "chat.completion" : "text_completion");
                      out["choices"] = choices;
                      out["usage"] = Usage(prompt_tokens, completion_tokens);
                      reply(HttpRouter::JsonResponse(http::status::ok, DumpJson(out), v, ka));
                    });
    }
    return;
  }

  if (target == "/v1/embeddings" || target == "/embed") {
    auto model = ResolveModel(service_, body, "embed", target);
    if (!model.ok()) return fail(model.status());
    auto r = NewRequest(*model);
    const char* key = tei ? "inputs" : "input";
    const json* input = Field(body, key);
    if (!input) return fail(FieldError(key, "required"));
    // A list of token ids; each must fit the int32 the model's TOKENS input holds.
    auto is_ids = [](const json& j) {
      return j.is_array() && !j.empty() &&
             std::all_of(j.begin(), j.end(), [](const json& t) {
               return t.is_number_integer() && t.get<int64_t>() >= 0 &&
                      t.get<int64_t>() <= INT32_MAX;
             });
    };
    // One text's token ids as the TOKENS input holds them: little-endian int32.
    auto pack_ids = [](const json& list) {
      std::string packed;
      for (const auto& t : list) {
        const auto id = static_cast<int32_t>(t.get<int64_t>());
        packed.append(reinterpret_cast<const char*>(&id), sizeof id);
      }
      return packed;
    };
    std::vector<std::string> texts;
    bool ids = false;
    if (input->is_string()) {
      texts.push_back(input->get<std::string>());
    } else if (!tei && is_ids(*input)) {
      ids = true;
      texts.push_back(pack_ids(*input));
    } else if (input->is_array() && !input->empty()) {
      ids = !tei && (*input)[0].is_array();
      for (size_t i = 0; i < input->size(); ++i) {
        const json& item = (*input)[i];
        const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
        if (ids && is_ids(item)) {
          texts.push_back(pack_ids(item));
        } else if (!ids && item.is_string()) {
          texts.push_back(item.get<std::string>());
        } else {
          return fail(FieldError(at, ids ? "expected a non-empty list of token ids, " + Found(item)
                                         : "expected a string, " + Found(item)));
        }
      }
    } else {
      return fail(FieldError(key, tei ? "expected a string or a non-empty list of strings, " +
                                            Found(*input)
                                      : "expected a string, a list of strings, a list of token "
                                        "ids or a list of such lists, " + Found(*input)));
    }
    for (size_t i = 0; i < texts.size(); ++i) {
      if (texts[i].empty()) {
        return fail(FieldError(input->is_string() ? std::string(key)
                                                  : std::string(key) + "[" + std::to_string(i) + "]",
                               "must not be empty"));
      }
    }
    r->inputs.push_back(StringsTensor(ids ? "TOKENS" : "TEXT", texts));
    bool base64 = false;
    if (!tei) {
      if (const json* format = Field(body, "encoding_format")) {
        if (*format != "float" && *format != "base64") {
          return fail(FieldError("encoding_format", "expected float or base64, " + Found(*format)));
        }
        base64 = *format == "base64";
      }
      std::optional<int64_t> dimensions;
      if (Status s = ReadInt(body, "dimensions", 1, 1 << 20, dimensions); !s.ok()) return fail(s);
      int64_t width = 0;
      for (const auto& o : model->signature.outputs) {
        if (o.name == "EMBEDDING" && o.shape.size() == 2) width = o.shape[1];
      }
      if (dimensions && width > 0 && *dimensions != width) {
        return fail(FieldError("dimensions", "'" + model->config.name + "' gives vectors of " +
                                                 std::to_string(width) + " dimensions, not " +
                                                 std::to_string(*dimensions)));
      }
    } else {
      std::optional<bool> normalize, truncate;
      if (Status s = ReadBool(body, "normalize", normalize); !s.ok()) return fail(s);
      if (Status s = ReadBool(body, "truncate", truncate); !s.ok()) return fail(s);
      if (normalize) r->parameters["normalize"] = *normalize;
      if (truncate) r->parameters["truncate"] = *truncate;
    }
    if (Status s = ReadScheduling(body, *r); !s.ok()) return fail(s);
    return SubmitRequest(
        service_, std::move(r), connection,
        [reply, v, ka, tei, base64, name = model->config.name](Result<InferResponse> result) {
          const Dialect d = tei ? Dialect::kTei : Dialect::kOpenAi;
          if (!result.ok()) return reply(ApiError(result.status(), d, v, ka));
          const Tensor* e = Output(*result, "EMBEDDING");
          if (!e || e->shape().size() != 2) {
            return reply(ApiError(Internal("the model gave no EMBEDDING output"), d, v, ka));
          }
          const auto values = Floats(*e);
          const auto rows = static_cast<size_t>(e->shape()[0]);
          const auto width = static_cast<size_t>(e->shape()[1]);
          json data = json::array();
          for (size_t i = 0; i < rows; ++i) {
            const auto row = values.subspan(i * width, width);
            if (tei) {
              data.push_back(std::vector<float>(row.begin(), row.end()));
              continue;
            }
            json item = {{"object", "embedding"}, {"index", i}};
            if (base64) {
              item["embedding"] = Base64Encode(std::string_view(
                  reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float)));
            } else {
              item["embedding"] = std::vector<float>(row.begin(), row.end());
            }
            data.push_back(std::move(item));
          }
          if (tei) return reply(HttpRouter::JsonResponse(http::status::ok, DumpJson(data), v, ka));
          const int64_t tokens = NumberParam<int64_t>(result->parameters, "prompt_tokens", 0);
          json out = {{"object", "list"},
                      {"data", data},
                      {"model", name},
                      {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
          reply(HttpRouter::JsonResponse(http::status::ok, DumpJson(out), v, ka));
        });
  }

  if (target == "/v1/rerank" || target == "/v1/reranking" || target == "/rerank" ||
      target == "/reranking") {
    auto model = ResolveModel(service_, body, "rerank", target);
    if (!model.ok()) return fail(model.status());
    auto r = NewRequest(*model);
    const json* query = Field(body, "query");
    if (!query || !query->is_string() || query->get<std::string>().empty()) {
      return fail(FieldError("query", "expected a non-empty string, " +
                                          (query ? Found(*query) : std::string("found nothing"))));
    }
    const char* key = tei ? "texts" : "documents";
    const json* docs = Field(body, key);
    if (!docs || !docs->is_array() || docs->empty()) {
      return fail(FieldError(key, "expected a non-empty list, " +
                                      (docs ? Found(*docs) : std::string("found nothing"))));
    }
    std::vector<std::string> texts;
    for (size_t i = 0; i < docs->size(); ++i) {
      const json& d = (*docs)[i];
      if (d.is_string()) {
        texts.push_back(d.get<std::string>());
      } else if (!tei && d.is_object() && d.contains("text") && d["text"].is_string()) {
        texts.push_back(d["text"].get<std::string>());  // Cohere/Jina: {"text": ...}
      } else {
        return fail(FieldError(std::string(key) + "[" + std::to_string(i) + "]",
                               "expected a string" + std::string(tei ? "" : " or {\"text\": ...}") +
                                   ", " + Found(d)));
      }
    }
    std::optional<int64_t> top_n;
    std::optional<bool> return_documents, raw_scores, truncate;
    if (Status s = ReadInt(body, "top_n", 1, INT32_MAX, top_n); !s.ok()) return fail(s);
    if (Status s = ReadBool(body, tei ? "return_text" : "return_documents", return_documents);
        !s.ok()) {
      return fail(s);
    }
    if (Status s = ReadBool(body, "raw_scores", raw_scores); !s.ok()) return fail(s);
    if (Status s = ReadBool(body, "truncate", truncate); !s.ok()) return fail(s);
    if (tei) r->parameters["sigmoid"] = !raw_scores.value_or(false);  // TEI's default: sigmoid
    if (truncate) r->parameters["truncate"] = *truncate;
    if (Status s = ReadScheduling(body, *r); !s.ok()) return fail(s);
    r->inputs.push_back(StringsTensor("QUERY", {query->get<std::string>()}));
    r->inputs.push_back(StringsTensor("DOCUMENTS", texts));
    return SubmitRequest(
        service_, std::move(r), connection,
        [reply, v, ka, tei, texts, top_n, with_text = return_documents.value_or(false),
         name = model->config.name](Result<InferResponse> result) {
          const Dialect d = tei ? Dialect::kTei : Dialect::kOpenAi;
          if (!result.ok()) return reply(ApiError(result.status(), d, v, ka));
          const Tensor* scores = Output(*result, "SCORES");
          if (!scores) return reply(ApiError(Internal("the model gave no SCORES output"), d, v, ka));
          const auto values = Floats(*scores);
          std::vector<size_t> order(values.size());
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(),
                           [&](size_t a, size_t b) { return values[a] > values[b]; });
          if (top_n && order.size() > static_cast<size_t>(*top_n)) order.resize(*top_n);
          json results = json::array();
          for (size_t i : order) {
            json item = {{"index", i}, {tei ? "score" : "relevance_score", values[i]}};
            if (with_text && tei) item["text"] = texts[i];
            if (with_text && !tei) item["document"] = {{"text", texts[i]}};
            results.push_back(std::move(item));
          }
          if (tei) {
            return reply(HttpRouter::JsonResponse(http::status::ok, DumpJson(results), v, ka));
          }
          const int64_t tokens = NumberParam<int64_t>(result->parameters, "prompt_tokens", 0);
          json out = {{"model", name},
                      {"object", "list"},
                      {"results", results},
                      {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
          reply(HttpRouter::JsonResponse(http::status::ok, DumpJson(out), v, ka));
        });
  }
  fail(NotFound("no route for POST " + path));
}

}  // namespace mmserve
