// POST /tokenize and /detokenize in llama-server's shapes, for llama models:
//   /tokenize    {"content": "...", "add_special": false, "with_pieces": false, "model": "..."}
//                → {"tokens": [ids]}, or [{"id", "piece"}] with with_pieces; `content` may also
//                be a list of texts and token ids, as llama-server takes it
//   /detokenize  {"tokens": [ids], "model": "..."} → {"content": "..."}
// `model` is mmserve's addition (llama-server serves one model): optional when one llama
// model is served. No queue: the tokenizer runs on the routed version's loaded session, on the
// I/O thread for a short text (microseconds) and on a body thread for a long one (a body over
// 16 KiB, http_connection.cc). The text is bounded (kMaxTokenizeBytes), and so the answer,
// which is written straight into its string without a JSON document.
#include <set>

#include "common/json.h"
#include "common/strings.h"
#include "server/http/json_writer.h"
#include "server/http/openai_common.h"

namespace mmserve::openai {
namespace {

namespace http = boost::beast::http;

constexpr size_t kMaxDetokenize = 1 << 20;  // token ids in one /detokenize
// Bytes of text in one /tokenize: at most as many tokens, an answer of at most ~40 MB with
// pieces. Longer than any model's context (llama-server's largest are 1M tokens, ~4 MB).
constexpr size_t kMaxTokenizeBytes = 4u << 20;

// {"tokens":[1,2]} or {"tokens":[{"id":1,"piece":"a"}]}. A piece that is not valid UTF-8 on its
// own (one byte of a character several tokens spell) is its bytes, [240,159], as llama-server
// writes it: the pieces still join into the text.
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
    const std::string& piece = tokens[i].piece;
    if (IsValidUtf8(piece)) {
      AppendString(out, piece);
    } else {
      out += '[';
      for (size_t b = 0; b < piece.size(); ++b) {
        if (b) out += ',';
        AppendInteger(out, static_cast<unsigned>(static_cast<unsigned char>(piece[b])));
      }
      out += ']';
    }
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

// One element of `content`: a text to tokenize, or a token id taken as it is.
struct ContentPart {
  const std::string* text = nullptr;
  int32_t id = 0;
};

// `content`: a string, or llama-server's mixed list of strings and token ids. The texts
// together are bounded by kMaxTokenizeBytes, the list by kMaxDetokenize elements.
Result<std::vector<ContentPart>> ReadContent(const json& body) {
  const json* content = Field(body, "content");
  const bool list = content && content->is_array();
  if (!content || !(content->is_string() || list) || (list && content->size() > kMaxDetokenize)) {
    return FieldError("content", "expected a string, or a list of at most " +
                                     std::to_string(kMaxDetokenize) + " strings and token ids, " +
                                     (content ? Found(*content) : "found nothing"));
  }
  std::vector<ContentPart> parts;
  size_t bytes = 0;
  for (size_t i = 0; i < (list ? content->size() : 1); ++i) {
    const json& part = list ? (*content)[i] : *content;
    const std::string field = list ? "content[" + std::to_string(i) + "]" : "content";
    if (part.is_string()) {
      parts.push_back({.text = &part.get_ref<const std::string&>()});
      bytes += parts.back().text->size();
      if (bytes > kMaxTokenizeBytes) {
        return FieldError(field, (list ? "makes the texts " : "is ") + std::to_string(bytes) +
                                     " bytes; /tokenize takes at most " +
                                     std::to_string(kMaxTokenizeBytes));
      }
    } else if (list && part.is_number_integer() && part.get<int64_t>() >= 0 &&
               part.get<int64_t>() <= INT32_MAX) {
      parts.push_back({.id = static_cast<int32_t>(part.get<int64_t>())});
    } else {
      return FieldError(field, std::string(list ? "expected a string or a token id, "
                                                : "expected a string, ") + Found(part));
    }
  }
  return parts;
}

// The tokens of `parts`: each text tokenized (the special tokens added to the first element
// only, as llama-server does), each id checked against the vocabulary and kept.
Result<std::vector<Session::Token>> TokenizeContent(const Session& session,
                                                    const std::vector<ContentPart>& parts,
                                                    bool add_special, bool with_pieces) {
  std::vector<Session::Token> tokens;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].text) {
      MMS_ASSIGN_OR_RETURN(auto some, session.Tokenize(*parts[i].text, add_special && i == 0,
                                                       with_pieces));
      tokens.insert(tokens.end(), std::make_move_iterator(some.begin()),
                    std::make_move_iterator(some.end()));
      continue;
    }
    auto piece = session.Detokenize(std::span<const int32_t>(&parts[i].id, 1));
    if (!piece.ok()) {
      if (piece.status().code() != StatusCode::kInvalidArgument) return piece.status();
      const std::string_view why = piece.status().message();  // "tokens[0]: expected ..."
      return FieldError("content[" + std::to_string(i) + "]",
                        std::string(why.substr(why.find(": ") == std::string_view::npos
                                                   ? 0
                                                   : why.find(": ") + 2)));
    }
    tokens.push_back({.id = parts[i].id, .piece = with_pieces ? std::move(*piece) : ""});
  }
  return tokens;
}

}  // namespace

void HandleTokenize(const Call& call) {
  auto name = TokenizerModel(call.service, call.body);
  if (!name.ok()) return call.Fail(name.status());
  auto parts = ReadContent(call.body);
  if (!parts.ok()) return call.Fail(parts.status());
  std::optional<bool> add_special, with_pieces;
  if (Status s = ReadBool(call.body, "add_special", add_special); !s.ok()) return call.Fail(s);
  if (Status s = ReadBool(call.body, "with_pieces", with_pieces); !s.ok()) return call.Fail(s);
  std::string answer;
  Status s = call.service.WithSession({.name = *name}, [&](const Session& session) -> Status {
    MMS_ASSIGN_OR_RETURN(auto tokens, TokenizeContent(session, *parts, add_special.value_or(false),
                                                      with_pieces.value_or(false)));
    answer = TokensAnswer(tokens, with_pieces.value_or(false));
    return Status::Ok();
  });
  if (!s.ok()) return call.Fail(InModel(s, *name));
  call.reply(JsonResponse(http::status::ok, std::move(answer)));
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
  call.reply(JsonResponse(http::status::ok, DumpJson({{"content", text}})));
}

}  // namespace mmserve::openai
