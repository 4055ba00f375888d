// POST /tokenize and /detokenize in llama-server's shapes, for llama models:
//   /tokenize    {"content": "...", "add_special": false, "with_pieces": false, "model": "..."}
//                → {"tokens": [ids]}, or [{"id", "piece"}] with with_pieces
//   /detokenize  {"tokens": [ids], "model": "..."} → {"content": "..."}
// `model` is mmserve's addition (llama-server serves one model): optional when one llama
// model is served. No queue: the tokenizer runs on the routed version's loaded session, on the
// I/O thread for a short text (microseconds) and on a body thread for a long one (a body over
// 16 KiB, http_connection.cc). The text is bounded (kMaxTokenizeBytes), and so the answer,
// which is written straight into its string without a JSON document.
#include <set>

#include "common/json.h"
#include "server/http/json_writer.h"
#include "server/http/openai_common.h"

namespace mmserve::openai {
namespace {

namespace http = boost::beast::http;

constexpr size_t kMaxDetokenize = 1 << 20;  // token ids in one /detokenize
// Bytes of text in one /tokenize: at most as many tokens, an answer of at most ~40 MB with
// pieces. Longer than any model's context (llama-server's largest are 1M tokens, ~4 MB).
constexpr size_t kMaxTokenizeBytes = 4u << 20;

// {"tokens":[1,2]} or {"tokens":[{"id":1,"piece":"a"}]}.
std::string TokensAnswer(const std::vector<Session::Token>& tokens, bool with_pieces) {
  std::string out;
  out.reserve(16 + tokens.size() * (with_pieces ? 24 : 7));
  out += "{\"tokens\":[";
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += ',';
    if (with_pieces) out += "{\"id\":";
    AppendInteger(out, tokens[i].id);
    if (!with_pieces) continue;
    out += ",\"piece\":";
    AppendString(out, tokens[i].piece);
    out += '}';
  }
  out += ']';
  out += '}';
  return out;
}

// The model `body.model` names, else the one llama model served.
Result<std::string> TokenizerModel(const InferenceService& service, const json& body) {
  return ModelName(
      body,
      [&service] {
        std::vector<std::string> names;
        std::set<std::string> seen;
        for (const auto& info : service.ListModels()) {
          if (info.config.backend == "llama" && seen.insert(info.config.name).second) {
            names.push_back(info.config.name);
          }
        }
        return names;
      },
      "llama");
}

// A field's error stays the field's (its message leads with the field, the answer's `param`);
// any other names the model.
Status InModel(const Status& s, const std::string& model) {
  if (s.code() == StatusCode::kInvalidArgument) return s;
  return s.WithContext("model '" + model + "'");
}

}  // namespace

void HandleTokenize(const Call& call) {
  auto name = TokenizerModel(call.service, call.body);
  if (!name.ok()) return call.Fail(name.status());
  const json* content = Field(call.body, "content");
  if (!content || !content->is_string()) {
    return call.Fail(FieldError(
        "content", "expected a string, " + (content ? Found(*content) : "found nothing")));
  }
  const auto& text = content->get_ref<const std::string&>();
  if (text.size() > kMaxTokenizeBytes) {
    return call.Fail(FieldError("content", "is " + std::to_string(text.size()) +
                                               " bytes; /tokenize takes at most " +
                                               std::to_string(kMaxTokenizeBytes)));
  }
  std::optional<bool> add_special, with_pieces;
  if (Status s = ReadBool(call.body, "add_special", add_special); !s.ok()) return call.Fail(s);
  if (Status s = ReadBool(call.body, "with_pieces", with_pieces); !s.ok()) return call.Fail(s);
  std::string answer;
  Status s = call.service.WithSession({.name = *name}, [&](const Session& session) -> Status {
    MMS_ASSIGN_OR_RETURN(auto tokens, session.Tokenize(text, add_special.value_or(false),
                                                       with_pieces.value_or(false)));
    answer = TokensAnswer(tokens, with_pieces.value_or(false));
    return Status::Ok();
  });
  if (!s.ok()) return call.Fail(InModel(s, *name));
  call.reply(JsonResponse(http::status::ok, std::move(answer), call.version, call.keep_alive));
}

void HandleDetokenize(const Call& call) {
  auto name = TokenizerModel(call.service, call.body);
  if (!name.ok()) return call.Fail(name.status());
  const json* list = Field(call.body, "tokens");
  if (!list || !list->is_array() || list->size() > kMaxDetokenize) {
    return call.Fail(FieldError("tokens", "expected a list of at most " +
                                              std::to_string(kMaxDetokenize) + " token ids, " +
                                              (list ? Found(*list) : "found nothing")));
  }
  std::vector<int32_t> ids;
  ids.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const json& t = (*list)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
      return call.Fail(FieldError("tokens[" + std::to_string(i) + "]",
                                  "expected a token id (an integer from 0), " + Found(t)));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  std::string text;
  Status s = call.service.WithSession({.name = *name}, [&](const Session& session) -> Status {
    MMS_ASSIGN_OR_RETURN(text, session.Detokenize(ids));
    return Status::Ok();
  });
  if (!s.ok()) return call.Fail(InModel(s, *name));
  call.reply(JsonResponse(http::status::ok, DumpJson({{"content", text}}), call.version,
                          call.keep_alive));
}

}  // namespace mmserve::openai
