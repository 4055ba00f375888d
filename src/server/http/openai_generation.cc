// POST /v1/chat/completions and /v1/completions: messages or prompts onto a generate model's
// inputs, answered whole or streamed as server-sent events.
#include <set>

#include "backend/generate_contract.h"
#include "common/json.h"
#include "server/http/openai_chat.h"

namespace mmserve::openai {
namespace {

namespace http = boost::beast::http;

// What a generation request asks for beyond its prompt.
struct GenerationOptions {
  bool stream = false;
  bool include_usage = false;
};

// `stop`: a string or up to 16, as the STOP input.
Status ReadStop(const json& body, InferRequest& r) {
  const json* stop = Field(body, "stop");
  if (!stop) return Status::Ok();
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
  if (!stops.empty()) r.inputs.push_back(StringsTensor(generate::kStop, stops));
  return Status::Ok();
}

// llama-server's cache_prompt (false: no reuse of a cached prompt) and vLLM's cache_salt (only
// requests with the same salt share a cached prompt: one tenant cannot time another's).
Status ReadCacheFields(const json& body, InferRequest& r) {
  std::optional<bool> cache_prompt;
  MMS_RETURN_IF_ERROR(ReadBool(body, "cache_prompt", cache_prompt));
  if (cache_prompt) r.parameters[generate::kCachePrompt] = *cache_prompt;
  if (const json* salt = Field(body, "cache_salt")) {
    if (!salt->is_string() || salt->get<std::string>().size() > 256) {
      return FieldError("cache_salt", "expected a string of at most 256 characters, " + Found(*salt));
    }
    r.parameters[generate::kCacheSalt] = salt->get<std::string>();
  }
  return Status::Ok();
}

// What OpenAI's API has and this server does not do: an error naming the field, never ignored.
Status RefuseUnsupported(const json& body) {
  std::optional<bool> logprobs;
  MMS_RETURN_IF_ERROR(ReadBool(body, "logprobs", logprobs));
  if (logprobs.value_or(false) || Field(body, "top_logprobs")) {
    return FieldError("logprobs", "log probabilities are not supported");
  }
  if (const json* bias = Field(body, "logit_bias"); bias && !bias->empty()) {
    return FieldError("logit_bias", "not supported");
  }
  return Status::Ok();
}

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
  MMS_RETURN_IF_ERROR(RefuseUnsupported(body));
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
  MMS_RETURN_IF_ERROR(ReadStop(body, r));
  MMS_RETURN_IF_ERROR(ReadCacheFields(body, r));
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

// OpenAI's usage; prompt_tokens_details.cached_tokens: prompt tokens whose cache an earlier
// request left (not decoded again).
json Usage(const RequestParams& p) {
  const auto prompt = NumberParam<int64_t>(p, generate::kPromptTokens, 0);
  const auto completion = NumberParam<int64_t>(p, generate::kCompletionTokens, 0);
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", NumberParam<int64_t>(p, generate::kCachedTokens, 0)}}}};
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
  json Choice(int index, const InferResponse& response, const json& finish_reason) const {
    json c = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
    if (chat) {
      c["message"] = AssistantMessage(response);
    } else {
      c["text"] = FirstText(response);
    }
    return c;
  }
  // A streamed piece: chat deltas carry the role first, then content or tool calls.
  json Chunk(const std::string& text, bool first, const json& finish_reason,
             json delta = json::object()) const {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
    if (chat) {
      if (first) delta = {{"role", "assistant"}, {"content", ""}};
      choice["delta"] = std::move(delta);
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
  bool started = false;
  size_t sent = 0;  // bytes of the text streamed so far

  void StartIfNeeded() {
    if (started) return;
    started = true;
    HttpResponse headers(http::status::ok, 11);  // the connection sets version and keep-alive
    headers.set(http::field::content_type, "text/event-stream");
    headers.set(http::field::cache_control, "no-cache");
    stream->Start(std::move(headers));
    if (gen.chat) stream->Send(Event(gen.Chunk("", /*first=*/true, nullptr)));
  }
  void Piece(const std::string& text) {
    StartIfNeeded();
    sent += text.size();
    stream->Send(Event(gen.Chunk(text, false, nullptr)));
  }
  void SendDeltas(std::vector<json> deltas) {
    StartIfNeeded();
    for (auto& delta : deltas) stream->Send(Event(gen.Chunk("", false, nullptr, std::move(delta))));
  }
  void Done(Result<InferResponse> result) {
    if (!result.ok() && !started) {
      return reply(ApiError(result.status(), Dialect::kOpenAi));
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
      // A chat's last deltas came as a partial; a completion's held-back tail comes now.
      if (!gen.chat && text.size() > sent) {
        stream->Send(Event(gen.Chunk(text.substr(sent), false, nullptr)));
      }
      const std::string reason = StringParam(result->parameters, generate::kFinishReason);
      stream->Send(Event(gen.Chunk("", false, reason.empty() ? "stop" : reason)));
      if (include_usage) {
        json usage = gen.Head(gen.chat ? "chat.completion.chunk" : "text_completion");
        usage["choices"] = json::array();
        usage["usage"] = Usage(result->parameters);
        stream->Send(Event(usage));
      }
    }
    stream->Send("data: [DONE]\n\n");
    stream->End();
  }
};

void StreamGeneration(const Call& call, const ModelDescription& model,
                      std::unique_ptr<InferRequest> r, std::shared_ptr<GenerationStream> state) {
  r->on_partial = [state, dispatch = call.connection.dispatch](const InferResponse& partial) {
    if (state->stream->broken()) return false;  // the client went away: stop generating
    if (state->gen.chat) {
      std::vector<json> deltas = Deltas(partial);
      if (!deltas.empty()) {
        dispatch([state, deltas = std::move(deltas)]() mutable { state->SendDeltas(std::move(deltas)); });
      }
    } else {
      dispatch([state, piece = FirstText(partial)] { state->Piece(piece); });
    }
    return true;
  };
  SubmitRequest(call, model, std::move(r),
                [state](Result<InferResponse> result) { state->Done(std::move(result)); });
}


// `prompt` of /v1/completions: one string or several (each its own request).
Result<std::vector<std::string>> ReadPrompts(const json& body) {
  const json* prompt = Field(body, "prompt");
  if (!prompt) return FieldError("prompt", "required");
  std::vector<std::string> prompts;
  if (prompt->is_string()) {
    prompts.push_back(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty() &&
             std::all_of(prompt->begin(), prompt->end(),
                         [](const json& p) { return p.is_string(); })) {
    for (const auto& p : *prompt) prompts.push_back(p.get<std::string>());
  } else {
    return FieldError("prompt", "expected a string or a non-empty list of strings "
                                "(token ids are not supported here), " +
                                    Found(*prompt));
  }
  if (const json* echo = Field(body, "echo"); echo && *echo != false) {
    return FieldError("echo", "not supported");
  }
  if (const json* suffix = Field(body, "suffix"); suffix && *suffix != "") {
    return FieldError("suffix", "not supported");
  }
  return prompts;
}

// Every prompt is its own request (the generator batches them); the answer waits for all.
void GatherCompletions(const Call& call, const ModelDescription& model, const Generation& gen,
                       std::vector<std::unique_ptr<InferRequest>> requests) {
  struct Gather {
    std::vector<std::optional<Result<InferResponse>>> results;
    size_t pending = 0;
  };
  auto gather = std::make_shared<Gather>();
  gather->results.resize(requests.size());
  gather->pending = requests.size();
  for (size_t i = 0; i < requests.size(); ++i) {
    SubmitRequest(call, model, std::move(requests[i]),
                  [gather, i, gen, reply = call.reply](Result<InferResponse> result) {
                    gather->results[i] = std::move(result);
                    if (--gather->pending > 0) return;
                    json choices = json::array();
                    RequestParams total;  // the counts of every choice, summed
                    for (size_t k = 0; k < gather->results.size(); ++k) {
                      const auto& res = *gather->results[k];
                      if (!res.ok()) return reply(ApiError(res.status(), Dialect::kOpenAi));
                      for (const char* key : {generate::kPromptTokens, generate::kCompletionTokens,
                                              generate::kCachedTokens}) {
                        total[key] = NumberParam<int64_t>(total, key, 0) +
                                     NumberParam<int64_t>(res->parameters, key, 0);
                      }
                      const std::string reason = StringParam(res->parameters, generate::kFinishReason);
                      choices.push_back(gen.Choice(static_cast<int>(k), *res,
                                                   reason.empty() ? "stop" : reason));
                    }
                    json out = gen.Head(gen.chat ? "chat.completion" : "text_completion");
                    out["choices"] = choices;
                    out["usage"] = Usage(total);
                    reply(JsonResponse(http::status::ok, DumpJson(out)));
                  });
  }
}


// POST /apply-template (llama-server's): the prompt a conversation becomes, rendered by the
// model's template in its generator (in its worker when isolated); nothing is generated.
void ApplyTemplate(const Call& call, const ModelDescription& model) {
  auto r = NewRequest(model);
  if (Status s = ReadChat(call.body, *r); !s.ok()) return call.Fail(s);
  if (Status s = ReadScheduling(call.body, *r); !s.ok()) return call.Fail(s);
  r->parameters[generate::kRenderOnly] = true;
  SubmitRequest(call, model, std::move(r),
                [reply = call.reply,
                 dialect = call.dialect](Result<InferResponse> result) {
                  if (!result.ok()) return reply(ApiError(result.status(), dialect));
                  reply(JsonResponse(http::status::ok,
                                     DumpJson({{"prompt", FirstText(*result)}})));
                });
}

}  // namespace

void HandleGeneration(const Call& call) {
  if (call.target == "/apply-template") {
    auto model = ResolveModel(call.service, call.body, "generate", call.target);
    if (!model.ok()) return call.Fail(model.status());
    return ApplyTemplate(call, *model);
  }
  const bool chat = call.target == "/v1/chat/completions";
  auto model = ResolveModel(call.service, call.body, "generate", call.target);
  if (!model.ok()) return call.Fail(model.status());
  Generation gen{.chat = chat,
                 .id = RandomId(chat ? "chatcmpl-" : "cmpl-"),
                 .created = Unix(),
                 .model = model->config().name};
  std::vector<std::string> prompts;
  if (!chat) {
    auto read = ReadPrompts(call.body);
    if (!read.ok()) return call.Fail(read.status());
    prompts = std::move(*read);
  }
  GenerationOptions options;
  std::vector<std::unique_ptr<InferRequest>> requests;
  const size_t count = chat ? 1 : prompts.size();
  for (size_t i = 0; i < count; ++i) {
    auto r = NewRequest(*model);
    if (chat) {
      if (Status s = ReadChat(call.body, *r); !s.ok()) return call.Fail(s);
    } else {
      r->inputs.push_back(StringsTensor(generate::kPrompt, {prompts[i]}));
      if (Status s = ReadResponseFormat(call.body, *r); !s.ok()) return call.Fail(s);
      for (const char* field : {"tools", "tool_choice", "messages"}) {
        if (Field(call.body, field)) {
          return call.Fail(FieldError(field, "only /v1/chat/completions takes it"));
        }
      }
    }
    if (Status s = ReadGeneration(call.body, *r, options); !s.ok()) return call.Fail(s);
    requests.push_back(std::move(r));
  }
  if (!options.stream) return GatherCompletions(call, *model, gen, std::move(requests));
  if (requests.size() != 1) {
    return call.Fail(FieldError("prompt", "a streamed completion takes one prompt"));
  }
  auto state = std::make_shared<GenerationStream>();
  state->gen = gen;
  state->include_usage = options.include_usage;
  state->stream = call.connection.open_stream();
  state->reply = call.reply;
  StreamGeneration(call, *model, std::move(requests[0]), std::move(state));
}

}  // namespace mmserve::openai
