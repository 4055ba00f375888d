// POST /v1/embeddings (OpenAI) and /embed (Hugging Face TEI): texts or token ids onto an embed
// model's TEXT or TOKENS input; the EMBEDDING rows written straight from the output tensor.
#include "common/json.h"
#include "common/strings.h"
#include "server/http/json_writer.h"
#include "server/http/openai_common.h"

namespace mmserve::openai {
namespace {

namespace http = boost::beast::http;

// A list of token ids; each must fit the int32 the model's TOKENS input holds.
bool IsTokenIds(const json& j) {
  return j.is_array() && !j.empty() && std::all_of(j.begin(), j.end(), [](const json& t) {
           return t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX;
         });
}

// One text's token ids as the TOKENS input holds them: little-endian int32.
std::string PackTokenIds(const json& list) {
  std::string packed;
  for (const auto& t : list) {
    const auto id = static_cast<int32_t>(t.get<int64_t>());
    packed.append(reinterpret_cast<const char*>(&id), sizeof id);
  }
  return packed;
}

// The `input` (TEI: `inputs`) field as the TEXT or TOKENS input: a string, a list of strings,
// a list of token ids, or a list of such lists (TEI: strings only).
Result<Tensor> ReadInput(const json& body, bool tei) {
  const char* key = tei ? "inputs" : "input";
  const json* input = Field(body, key);
  if (!input) return FieldError(key, "required");
  std::vector<std::string> texts;
  bool ids = false;
  if (input->is_string()) {
    texts.push_back(input->get<std::string>());
  } else if (!tei && IsTokenIds(*input)) {
    ids = true;
    texts.push_back(PackTokenIds(*input));
  } else if (input->is_array() && !input->empty()) {
    ids = !tei && (*input)[0].is_array();
    for (size_t i = 0; i < input->size(); ++i) {
      const json& item = (*input)[i];
      const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
      if (ids && IsTokenIds(item)) {
        texts.push_back(PackTokenIds(item));
      } else if (!ids && item.is_string()) {
        texts.push_back(item.get<std::string>());
      } else {
        return FieldError(at, ids ? "expected a non-empty list of token ids, " + Found(item)
                                  : "expected a string, " + Found(item));
      }
    }
  } else {
    return FieldError(key, tei ? "expected a string or a non-empty list of strings, " +
                                     Found(*input)
                               : "expected a string, a list of strings, a list of token "
                                 "ids or a list of such lists, " + Found(*input));
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) {
      return FieldError(input->is_string() ? std::string(key)
                                           : std::string(key) + "[" + std::to_string(i) + "]",
                        "must not be empty");
    }
  }
  return StringsTensor(ids ? "TOKENS" : "TEXT", texts);
}

// The width of the vectors `model` gives, when its signature says (0: not known yet).
int64_t EmbeddingWidth(const ModelDescription& model) {
  for (const auto& o : model.signature.outputs) {
    if (o.name == "EMBEDDING" && o.shape.size() == 2) return o.shape[1];
  }
  return 0;
}

// One row as a JSON array of numbers: each float widened to double and written shortest, so
// that it reads back as the very value a json library would give for it.
void AppendRow(std::string& out, std::span<const float> row) {
  AppendArray<kMaxNumberChars>(out, row.size(), [&](char* p, size_t i) {
    return WriteFloat(p, static_cast<double>(row[i]));
  });
}

struct EmbeddingsAnswer {
  bool tei = false;
  bool base64 = false;
  std::string model;

  // The JSON body for `rows` × `width` floats; keys in the order a json object sorts them.
  std::string Write(std::span<const float> values, size_t rows, size_t width,
                    int64_t tokens) const {
    std::string out;
    out.reserve(rows * width * 12 + 128);
    out += tei ? "[" : "{\"data\":[";
    for (size_t i = 0; i < rows; ++i) {
      if (i) out += ',';
      const auto row = values.subspan(i * width, width);
      if (tei) {
        AppendRow(out, row);
        continue;
      }
      out += "{\"embedding\":";
      if (base64) {
        AppendString(out, Base64Encode(std::string_view(
                              reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float))));
      } else {
        AppendRow(out, row);
      }
      out += ",\"index\":";
      AppendInteger(out, i);
      out += ",\"object\":\"embedding\"}";
    }
    if (tei) return out + "]";
    out += "],\"model\":";
    AppendString(out, model);
    out += ",\"object\":\"list\",\"usage\":{\"prompt_tokens\":";
    AppendInteger(out, tokens);
    out += ",\"total_tokens\":";
    AppendInteger(out, tokens);
    out += "}}";
    return out;
  }
};

// The OpenAI-only fields: encoding_format, and dimensions (the model's width as it is; another
// width is the engine's to grant: a model trained to be cut, params.matryoshka_dims).
Status ReadOpenAiOptions(const json& body, const ModelDescription& model, bool& base64,
                         InferRequest& r) {
  if (const json* format = Field(body, "encoding_format")) {
    if (*format != "float" && *format != "base64") {
      return FieldError("encoding_format", "expected float or base64, " + Found(*format));
    }
    base64 = *format == "base64";
  }
  std::optional<int64_t> dimensions;
  MMS_RETURN_IF_ERROR(ReadInt(body, "dimensions", 1, 1 << 20, dimensions));
  const int64_t width = EmbeddingWidth(model);
  if (dimensions && *dimensions != width) r.parameters["dimensions"] = *dimensions;
  return Status::Ok();
}

}  // namespace

void HandleEmbeddings(const Call& call) {
  const bool tei = call.dialect == Dialect::kTei;
  auto model = ResolveModel(call.service, call.body, "embed", call.target);
  if (!model.ok()) return call.Fail(model.status());
  auto r = NewRequest(*model);
  auto input = ReadInput(call.body, tei);
  if (!input.ok()) return call.Fail(input.status());
  r->inputs.push_back(std::move(*input));
  EmbeddingsAnswer answer{.tei = tei, .model = model->config().name};
  if (!tei) {
    if (Status s = ReadOpenAiOptions(call.body, *model, answer.base64, *r); !s.ok()) {
      return call.Fail(s);
    }
  } else {
    std::optional<bool> normalize, truncate;
    if (Status s = ReadBool(call.body, "normalize", normalize); !s.ok()) return call.Fail(s);
    if (Status s = ReadBool(call.body, "truncate", truncate); !s.ok()) return call.Fail(s);
    if (normalize) r->parameters["normalize"] = *normalize;
    if (truncate) r->parameters["truncate"] = *truncate;
  }
  if (Status s = ReadScheduling(call.body, *r); !s.ok()) return call.Fail(s);
  SubmitRequest(call, *model, std::move(r),
                [reply = call.reply,
                 answer = std::move(answer)](Result<InferResponse> result) {
                  const Dialect d = answer.tei ? Dialect::kTei : Dialect::kOpenAi;
                  if (!result.ok()) return reply(ApiError(result.status(), d));
                  const Tensor* e = Output(*result, "EMBEDDING");
                  const auto values = e ? Floats(*e) : std::span<const float>();
                  if (!e || e->shape().size() != 2 || e->shape()[0] < 0 || e->shape()[1] < 0 ||
                      values.size() != static_cast<size_t>(e->shape()[0] * e->shape()[1])) {
                    return reply(ApiError(Internal("the model gave no EMBEDDING output"), d));
                  }
                  const int64_t tokens =
                      NumberParam<int64_t>(result->parameters, "prompt_tokens", 0);
                  reply(JsonResponse(http::status::ok,
                                     answer.Write(values, static_cast<size_t>(e->shape()[0]),
                                                  static_cast<size_t>(e->shape()[1]), tokens)));
                },
                Delivery::kSoleAnswer);
}

}  // namespace mmserve::openai
