// POST /v1/rerank, /v1/reranking, /rerank, /reranking: a query and documents onto a rerank
// model's QUERY and DOCUMENTS inputs; the answer is the documents ordered by score. Jina and
// Cohere's shape (`documents`), or Hugging Face TEI's (`texts`). Scores are in 0..1 (sigmoid)
// unless `raw_scores` asks for the logits.
#include <numeric>

#include "common/json.h"
#include "server/http/openai_common.h"

namespace mmserve::openai {
namespace {

namespace http = boost::beast::http;

// `documents` (TEI: `texts`): strings, or Cohere/Jina's {"text": ...} objects.
Result<std::vector<std::string>> ReadDocuments(const json& body, bool tei) {
  const char* key = tei ? "texts" : "documents";
  const json* docs = Field(body, key);
  if (!docs || !docs->is_array() || docs->empty()) {
    return FieldError(key, "expected a non-empty list, " +
                               (docs ? Found(*docs) : std::string("found nothing")));
  }
  std::vector<std::string> texts;
  for (size_t i = 0; i < docs->size(); ++i) {
    const json& d = (*docs)[i];
    if (d.is_string()) {
      texts.push_back(d.get<std::string>());
    } else if (!tei && d.is_object() && d.contains("text") && d["text"].is_string()) {
      texts.push_back(d["text"].get<std::string>());
    } else {
      return FieldError(std::string(key) + "[" + std::to_string(i) + "]",
                        "expected a string" + std::string(tei ? "" : " or {\"text\": ...}") +
                            ", " + Found(d));
    }
  }
  return texts;
}

struct RerankAnswer {
  bool tei = false;
  bool with_text = false;
  std::optional<int64_t> top_n;
  std::vector<std::string> texts;
  std::string model;

  std::string Write(std::span<const float> values, int64_t tokens) const {
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
    if (tei) return DumpJson(results);
    return DumpJson({{"model", model},
                     {"object", "list"},
                     {"results", results},
                     {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
  }
};

}  // namespace

void HandleRerank(const Call& call) {
  const bool tei = call.dialect == Dialect::kTei;
  auto model = ResolveModel(call.service, call.body, "rerank", call.target);
  if (!model.ok()) return call.Fail(model.status());
  auto r = NewRequest(*model);
  const json* query = Field(call.body, "query");
  if (!query || !query->is_string() || query->get<std::string>().empty()) {
    return call.Fail(FieldError("query", "expected a non-empty string, " +
                                             (query ? Found(*query) : std::string("found nothing"))));
  }
  auto texts = ReadDocuments(call.body, tei);
  if (!texts.ok()) return call.Fail(texts.status());
  RerankAnswer answer{.tei = tei, .texts = *texts, .model = model->config().name};
  std::optional<bool> return_documents, raw_scores, truncate;
  if (Status s = ReadInt(call.body, "top_n", 1, INT32_MAX, answer.top_n); !s.ok()) {
    return call.Fail(s);
  }
  if (Status s = ReadBool(call.body, tei ? "return_text" : "return_documents", return_documents);
      !s.ok()) {
    return call.Fail(s);
  }
  if (Status s = ReadBool(call.body, "raw_scores", raw_scores); !s.ok()) return call.Fail(s);
  if (Status s = ReadBool(call.body, "truncate", truncate); !s.ok()) return call.Fail(s);
  answer.with_text = return_documents.value_or(false);
  // Scores in 0..1 as Jina, Cohere and TEI return them (the logit's sigmoid); the raw logits
  // only with raw_scores: true.
  r->parameters["sigmoid"] = !raw_scores.value_or(false);
  if (truncate) r->parameters["truncate"] = *truncate;
  if (Status s = ReadScheduling(call.body, *r); !s.ok()) return call.Fail(s);
  r->inputs.push_back(StringsTensor("QUERY", {query->get<std::string>()}));
  r->inputs.push_back(StringsTensor("DOCUMENTS", *texts));
  SubmitRequest(call, *model, std::move(r),
                [reply = call.reply,
                 answer = std::move(answer)](Result<InferResponse> result) {
                  const Dialect d = answer.tei ? Dialect::kTei : Dialect::kOpenAi;
                  if (!result.ok()) return reply(ApiError(result.status(), d));
                  const Tensor* scores = Output(*result, "SCORES");
                  if (!scores) {
                    return reply(ApiError(Internal("the model gave no SCORES output"), d));
                  }
                  const int64_t tokens =
                      NumberParam<int64_t>(result->parameters, "prompt_tokens", 0);
                  reply(JsonResponse(http::status::ok, answer.Write(Floats(*scores), tokens)));
                },
                Delivery::kSoleAnswer);
}

}  // namespace mmserve::openai
