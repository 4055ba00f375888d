// OpenAiApi: the routes clients of other servers already speak, translated onto the models'
// tensors and submitted to the InferenceService like any KServe request:
//
//   POST /v1/chat/completions   messages, tools, response_format → MESSAGES, TOOLS, JSON_SCHEMA
//                               of a generate model (SSE with stream; openai_chat.h)
//   POST /v1/completions        prompt (a string or several) → PROMPT of a generate model
//   POST /apply-template        llama-server's: the prompt a chat request renders to
//   POST /v1/embeddings         input (strings or token id arrays) → TEXT/TOKENS of an embed model
//   GET  /v1/models[/{id}]      every served model with its task
//   POST /v1/rerank             Jina/Cohere shape: query, documents → QUERY/DOCUMENTS of a rerank
//                               model (also /v1/reranking, /rerank without `texts`)
//   POST /rerank, /embed        Hugging Face TEI's shapes (`texts`, `raw_scores`; `inputs`)
//   POST /tokenize, /detokenize llama-server's shapes, on a llama model's vocabulary
//
// The `model` field routes (optional when exactly one model serves the task). Errors use the
// OpenAI shape {"error": {"message", "type", "param", "code"}} (TEI routes: TEI's shape), with
// `param` naming the field. Runs on I/O threads; answers come back on the connection's strand.
#pragma once

#include <string>
#include <string_view>

#include "server/http/http_response.h"
#include "server/http/route_table.h"
#include "service/inference_service.h"

namespace mmserve {
namespace openai {
struct Call;
}

class OpenAiApi {
 public:
  // `service` is not owned and outlives the API.
  explicit OpenAiApi(InferenceService& service) : service_(service) {}

  // Adds the routes above to `table` (scope: inference; errors in the OpenAI or TEI shape).
  // The API outlives the table's use.
  void AddRoutes(RouteTable& table);
  // `status` in the error shape `style` names (kOpenAi or kTei).
  static HttpResponse Error(const Status& status, ErrorStyle style);

 private:
  using Handler = void (*)(const openai::Call&);
  // A POST route: the body read as a JSON object, then `handler`, which sees the route's own
  // path as the target (whatever slashes the client doubled or added).
  void Post(RouteCall& route, std::string_view target, ErrorStyle style, Handler handler);

  InferenceService& service_;  // not owned
};

}  // namespace mmserve
