// What the OpenAI-compatible route handlers share (server/http/openai_api.h lists the routes):
// reading body fields with errors that name them, the error shapes (OpenAI's, TEI's), the model
// a body names, and submitting a request whose answer comes back on the connection's strand.
// Internal to server/http.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/http/http_response.h"
#include "service/inference_service.h"

namespace mmserve::openai {

using nlohmann::json;

enum class Dialect { kOpenAi, kTei };

// An error about one field of the body: the message starts with the field's path, which the
// error response also gives as `param`.
Status FieldError(const std::string& field, const std::string& what);
std::string Found(const json& value);  // "found <the value, quoted and bounded>"
std::string ErrorType(boost::beast::http::status code);  // OpenAI's error `type`
HttpResponse ApiError(const Status& status, Dialect dialect);

// Whether `object` has the string member `key` equal to `expected`.
bool MemberEquals(const json& object, const char* key, std::string_view expected);
// A body field: absent when missing or null (clients send null for "not set").
const json* Field(const json& body, const char* key);
// Optional fields, checked: unset when absent, else a value in range or an error naming `key`.
Status ReadNumber(const json& body, const char* key, double lo, double hi,
                  std::optional<double>& out);
Status ReadInt(const json& body, const char* key, int64_t lo, int64_t hi,
               std::optional<int64_t>& out);
Status ReadBool(const json& body, const char* key, std::optional<bool>& out);

Tensor StringsTensor(std::string name, const std::vector<std::string>& items);
const Tensor* Output(const InferResponse& response, const std::string& name);
std::string FirstText(const InferResponse& response);  // the TEXT output's first element
std::span<const float> Floats(const Tensor& t);
int64_t Unix();                                 // seconds since the epoch
std::string RandomId(std::string_view prefix);  // prefix + 16 hex digits

// One call to a POST route: what every handler needs, and its two answers.
struct Call {
  InferenceService& service;
  const json& body;
  std::string_view target;
  Dialect dialect = Dialect::kOpenAi;
  HttpReply reply;
  HttpConnection connection;

  void Fail(const Status& status) const {
    reply(ApiError(status, dialect));
  }
};

// The model `body.model` names; without one, the only name `candidates()` gives (`kind` says
// what they are in errors: "embed", "llama"); else an error naming the field.
Result<std::string> ModelName(const json& body,
                              const std::function<std::vector<std::string>()>& candidates,
                              const std::string& kind);
// The model `body.model` names, which must serve `task`; without a name, the only model that
// serves it. Routed once: the request is then submitted to the version described.
Result<ModelDescription> ResolveModel(const InferenceService& service, const json& body,
                                      const std::string& task, std::string_view route);
std::unique_ptr<InferRequest> NewRequest(const ModelDescription& model);
// Scheduling extensions every route takes: priority (a level) and timeout_ms.
Status ReadScheduling(const json& body, InferRequest& r);
// How the outcome of a submitted request reaches its handler: on the connection's strand, or
// — when the handler's one effect is the HTTP request's final reply — through
// HttpConnection::answer (perhaps on the model's worker, which then writes the reply itself).
enum class Delivery { kStrand, kSoleAnswer };
// Submits `r` to `model`; `on_outcome` gets the outcome as `delivery` says. A client that
// leaves cancels the request (queued: dropped; generating: stopped).
void SubmitRequest(const Call& call, const ModelDescription& model,
                   std::unique_ptr<InferRequest> r,
                   std::function<void(Result<InferResponse>)> on_outcome,
                   Delivery delivery = Delivery::kStrand);

// The route families (each in its own file).
void HandleGeneration(const Call& call);  // /v1/chat/completions, /v1/completions
void HandleEmbeddings(const Call& call);  // /v1/embeddings, /embed
void HandleRerank(const Call& call);      // /v1/rerank, /v1/reranking, /rerank, /reranking
void HandleTokenize(const Call& call);    // /tokenize
void HandleDetokenize(const Call& call);  // /detokenize

}  // namespace mmserve::openai
