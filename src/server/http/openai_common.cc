#include "server/http/openai_common.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <sstream>

#include "common/json.h"
#include "common/strings.h"

namespace mmserve::openai {

namespace http = boost::beast::http;

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument(field + ": " + what);
}

std::string Found(const json& value) { return "found " + QuoteJson(value); }

namespace {

// The field a message names ("messages[0].role: ..."), or "".
std::string ParamOf(std::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos || colon == 0) return {};
  const std::string_view field = message.substr(0, colon);
  if (field.find(' ') != std::string_view::npos) return {};
  return std::string(field);
}

}  // namespace

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

namespace {

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

}  // namespace

HttpResponse ApiError(const Status& status, Dialect dialect) {
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
  HttpResponse res = JsonResponse(code, DumpJson(body));
  MarkRetryable(res, status);
  return res;
}

// A member of another type is simply not equal (json::value() would throw on it).
bool MemberEquals(const json& object, const char* key, std::string_view expected) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() && it->get_ref<const std::string&>() == expected;
}

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

Result<std::string> ModelName(const json& body,
                              const std::function<std::vector<std::string>()>& candidates,
                              const std::string& kind) {
  if (const json* model = Field(body, "model")) {
    if (!model->is_string() || model->get<std::string>().empty()) {
      return FieldError("model", "expected a model name, " + Found(*model));
    }
    return model->get<std::string>();
  }
  const std::vector<std::string> names = candidates();
  if (names.empty()) return NotFound("model: no " + kind + " model is served");
  if (names.size() > 1) {
    return FieldError("model", "required: several " + kind + " models are served (" +
                                   Join(names, ", ") + ")");
  }
  return names[0];
}

Result<ModelDescription> ResolveModel(const InferenceService& service, const json& body,
                                      const std::string& task, std::string_view route) {
  MMS_ASSIGN_OR_RETURN(const std::string name,
                       ModelName(body, [&] { return service.ModelsServing(task); }, task));
  auto described = service.Describe({.name = name});
  if (!described.ok()) return NotFound("model: " + std::string(described.status().message()));
  if (described->config().task != task) {
    return FieldError("model", "'" + name + "' serves task " + described->config().task + "; " +
                                   std::string(route) +
                                   (task.find_first_of("aeiou") == 0 ? " needs an " : " needs a ") +
                                   task + " model");
  }
  return described;
}

std::unique_ptr<InferRequest> NewRequest(const ModelDescription& model) {
  auto r = std::make_unique<InferRequest>();
  r->model_name = model.config().name;
  return r;
}

Status ReadScheduling(const json& body, InferRequest& r) {
  std::optional<int64_t> priority, timeout_ms;
  MMS_RETURN_IF_ERROR(ReadInt(body, "priority", 1, kMaxPriorityLevel, priority));
  MMS_RETURN_IF_ERROR(ReadInt(body, "timeout_ms", 1, int64_t{1} << 40, timeout_ms));
  if (priority) r.priority = static_cast<int>(*priority);
  if (timeout_ms) {
    // It may only shorten the model's timeout (the scheduler bounds the deadline by it too).
    const int64_t us = std::min(*timeout_ms * 1000, kMaxRequestTimeoutUs);
    r.deadline = std::min(r.deadline, r.arrival + std::chrono::microseconds(us));
  }
  return Status::Ok();
}

void SubmitRequest(const Call& call, const ModelDescription& model,
                   std::unique_ptr<InferRequest> r,
                   std::function<void(Result<InferResponse>)> on_outcome, Delivery delivery) {
  r->cancelled = call.connection.client_gone;
  r->route = call.connection.route;
  r->trace_id = call.connection.request_id;
  r->done = [dispatch = delivery == Delivery::kSoleAnswer ? call.connection.answer
                                                          : call.connection.dispatch,
             f = std::move(on_outcome)](Result<InferResponse> result) {
    dispatch([f, result = std::move(result)]() mutable { f(std::move(result)); });
  };
  call.service.Submit(model, std::move(r));
}

}  // namespace mmserve::openai
