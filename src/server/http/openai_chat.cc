// The chat fields of /v1/chat/completions (and /apply-template) beyond sampling: messages with
// tool calls and tool results, tools, tool_choice, parallel_tool_calls, response_format,
// chat_template_kwargs, reasoning_format. Each is checked here, with an error naming the field,
// and handed to the generator as inputs (MESSAGES, TOOLS, TEMPLATE_KWARGS, JSON_SCHEMA) and
// parameters; the model's template and llama.cpp's chat library do the rest in the backend.
#include <set>
#include <vector>

#include "backend/generate_contract.h"
#include "common/json.h"
#include "server/http/openai_chat.h"

namespace mmserve::openai {
namespace {

constexpr size_t kMaxTools = 128;
constexpr size_t kMaxToolCalls = 128;
constexpr size_t kMaxKwargs = 64;

// OpenAI's function and schema names: 1 to 64 of a-z, A-Z, 0-9, _ and -.
bool IsName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

Status ReadString(const json& object, const std::string& at, const char* key, bool required,
                  std::string* out = nullptr) {
  const json* value = Field(object, key);
  if (!value) return required ? FieldError(at + "." + key, "required") : Status::Ok();
  if (!value->is_string()) return FieldError(at + "." + key, "expected a string, " + Found(*value));
  if (out) *out = value->get<std::string>();
  return Status::Ok();
}

// `content`: a string, null, or text parts; returned as a string or a list of text parts.
Status ReadContent(const json& m, const std::string& at, const std::string& role, json& out) {
  const json* content = Field(m, "content");
  if (!content) {
    if (role != "assistant") return FieldError(at + ".content", "required");
    out["content"] = nullptr;
    return Status::Ok();
  }
  if (content->is_string()) {
    out["content"] = *content;
    return Status::Ok();
  }
  if (!content->is_array()) {
    return FieldError(at + ".content", "expected a string or a list of text parts, " +
                                           Found(*content));
  }
  json parts = json::array();
  for (size_t p = 0; p < content->size(); ++p) {
    const json& part = (*content)[p];
    if (!part.is_object() || !MemberEquals(part, "type", "text") || !part.contains("text") ||
        !part["text"].is_string()) {
      return FieldError(at + ".content[" + std::to_string(p) + "]",
                        "only {\"type\": \"text\", \"text\": ...} parts are supported, " +
                            Found(part));
    }
    parts.push_back({{"type", "text"}, {"text", part["text"]}});
  }
  out["content"] = std::move(parts);
  return Status::Ok();
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}].
Status ReadToolCalls(const json& calls, const std::string& at, json& out) {
  if (!calls.is_array() || calls.size() > kMaxToolCalls) {
    return FieldError(at, "expected a list of at most " + std::to_string(kMaxToolCalls) +
                              " tool calls, " + Found(calls));
  }
  json list = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string where = at + "[" + std::to_string(i) + "]";
    const json& call = calls[i];
    if (!call.is_object()) return FieldError(where, "expected a tool call object, " + Found(call));
    std::string id, name, arguments;
    MMS_RETURN_IF_ERROR(ReadString(call, where, "id", false, &id));
    if (const json* type = Field(call, "type"); type && *type != "function") {
      return FieldError(where + ".type", "expected \"function\", " + Found(*type));
    }
    const json* function = Field(call, "function");
    if (!function || !function->is_object()) {
      return FieldError(where + ".function", "expected {name, arguments}");
    }
    MMS_RETURN_IF_ERROR(ReadString(*function, where + ".function", "name", true, &name));
    MMS_RETURN_IF_ERROR(ReadString(*function, where + ".function", "arguments", false, &arguments));
    if (!arguments.empty() && ParseJson(arguments).is_discarded()) {
      return FieldError(where + ".function.arguments", "expected JSON text (an object)");
    }
    list.push_back({{"id", id},
                    {"type", "function"},
                    {"function", {{"name", name}, {"arguments", arguments.empty() ? "{}" : arguments}}}});
  }
  out["tool_calls"] = std::move(list);
  return Status::Ok();
}

Status ReadMessage(const json& m, const std::string& at, json& out) {
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  if (!m.is_object()) return FieldError(at, "expected a message object, " + Found(m));
  const json* role = Field(m, "role");
  if (!role || !role->is_string() || !kRoles.contains(role->get<std::string>())) {
    return FieldError(at + ".role", "expected system, developer, user, assistant or tool, " +
                                        (role ? Found(*role) : std::string("found nothing")));
  }
  const std::string r = role->get<std::string>();
  out = {{"role", r == "developer" ? "system" : r}};
  MMS_RETURN_IF_ERROR(ReadContent(m, at, r, out));
  if (const json* calls = Field(m, "tool_calls")) {
    if (r != "assistant") return FieldError(at + ".tool_calls", "only assistant messages call tools");
    MMS_RETURN_IF_ERROR(ReadToolCalls(*calls, at + ".tool_calls", out));
  } else if (r == "assistant" && out["content"].is_null()) {
    return FieldError(at + ".content", "an assistant message needs content or tool_calls");
  }
  std::string text;
  if (r == "tool") {
    MMS_RETURN_IF_ERROR(ReadString(m, at, "tool_call_id", false, &text));
    if (!text.empty()) out["tool_call_id"] = text;
  }
  MMS_RETURN_IF_ERROR(ReadString(m, at, "name", false, &text));
  if (!text.empty() && r == "tool") out["name"] = text;
  if (r == "assistant") {
    MMS_RETURN_IF_ERROR(ReadString(m, at, "reasoning_content", false, &text));
    if (!text.empty()) out["reasoning_content"] = text;
  }
  return Status::Ok();
}

// tools: [{type: "function", function: {name, description?, parameters?, strict?}}].
Status ReadTools(const json& body, InferRequest& r, std::set<std::string>& names) {
  const json* tools = Field(body, "tools");
  if (!tools) return Status::Ok();
  if (!tools->is_array() || tools->size() > kMaxTools) {
    return FieldError("tools", "expected a list of at most " + std::to_string(kMaxTools) +
                                   " tools, " + Found(*tools));
  }
  if (tools->empty()) return Status::Ok();
  json list = json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const json& tool = (*tools)[i];
    if (!tool.is_object() || !MemberEquals(tool, "type", "function")) {
      return FieldError(at + ".type", "expected a {\"type\": \"function\", ...} tool, " + Found(tool));
    }
    const json* function = Field(tool, "function");
    if (!function || !function->is_object()) return FieldError(at + ".function", "required");
    std::string name, description;
    MMS_RETURN_IF_ERROR(ReadString(*function, at + ".function", "name", true, &name));
    if (!IsName(name)) {
      return FieldError(at + ".function.name", "expected 1 to 64 of a-z, A-Z, 0-9, _ and -, " +
                                                   Found((*function)["name"]));
    }
    if (!names.insert(name).second) return FieldError(at + ".function.name", "a second tool named '" + name + "'");
    MMS_RETURN_IF_ERROR(ReadString(*function, at + ".function", "description", false, &description));
    json parameters = {{"type", "object"}, {"properties", json::object()}};
    if (const json* p = Field(*function, "parameters")) {
      if (!p->is_object()) return FieldError(at + ".function.parameters", "expected a JSON schema object, " + Found(*p));
      parameters = *p;
    }
    json f = {{"name", name}, {"parameters", parameters}};
    if (!description.empty()) f["description"] = description;
    list.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  r.inputs.push_back(StringsTensor(generate::kTools, {DumpJson(list)}));
  return Status::Ok();
}

// tool_choice: none | auto | required | {type: "function", function: {name}}.
Status ReadToolChoice(const json& body, InferRequest& r, const std::set<std::string>& names) {
  const json* choice = Field(body, "tool_choice");
  if (!choice) return Status::Ok();
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c != "none" && c != "auto" && c != "required") {
      return FieldError("tool_choice", "expected none, auto, required or {\"type\": \"function\", "
                                       "\"function\": {\"name\": ...}}, " + Found(*choice));
    }
    if (c == "required" && names.empty()) return FieldError("tool_choice", "required, but tools is empty");
    r.parameters[generate::kToolChoice] = c;
    return Status::Ok();
  }
  const json* function = choice->is_object() ? Field(*choice, "function") : nullptr;
  if (!MemberEquals(*choice, "type", "function") || !function || !function->is_object()) {
    return FieldError("tool_choice", "expected none, auto, required or {\"type\": \"function\", "
                                     "\"function\": {\"name\": ...}}, " + Found(*choice));
  }
  std::string name;
  MMS_RETURN_IF_ERROR(ReadString(*function, "tool_choice.function", "name", true, &name));
  if (!names.contains(name)) {
    return FieldError("tool_choice.function.name", "no function named " + QuoteJson(name) + " in tools");
  }
  r.parameters[generate::kToolChoice] = std::string("required");
  r.parameters[generate::kToolName] = name;
  return Status::Ok();
}

// OpenAI's strict mode: every object closes its properties and requires all of them.
Status CheckStrict(const json& schema, const std::string& field) {
  std::vector<std::pair<const json*, std::string>> stack = {{&schema, field}};
  while (!stack.empty()) {
    auto [node, at] = stack.back();
    stack.pop_back();
    if (node->is_array()) {
      for (size_t i = 0; i < node->size(); ++i) stack.push_back({&(*node)[i], at + "[" + std::to_string(i) + "]"});
      continue;
    }
    if (!node->is_object()) continue;
    const json* properties = Field(*node, "properties");
    if (MemberEquals(*node, "type", "object") || properties) {
      const json* extra = Field(*node, "additionalProperties");
      if (!extra || *extra != false) {
        return FieldError(at + ".additionalProperties", "strict: true needs false on every object");
      }
      const json* required = Field(*node, "required");
      for (auto it = properties && properties->is_object() ? properties->begin() : json::const_iterator();
           properties && properties->is_object() && it != properties->end(); ++it) {
        if (!required || !required->is_array() ||
            std::find(required->begin(), required->end(), it.key()) == required->end()) {
          return FieldError(at + ".required", "strict: true needs every property required; " +
                                                  QuoteJson(it.key()) + " is not");
        }
      }
    }
    for (auto it = node->begin(); it != node->end(); ++it) {
      if (it->is_structured()) stack.push_back({&*it, at + "." + it.key()});
    }
  }
  return Status::Ok();
}

}  // namespace

Status ReadResponseFormat(const json& body, InferRequest& r) {
  const json* format = Field(body, "response_format");
  if (!format) return Status::Ok();
  const json* type = format->is_object() ? Field(*format, "type") : nullptr;
  if (!type || !type->is_string()) {
    return FieldError("response_format.type", "expected text, json_object or json_schema");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return Status::Ok();
  json schema = json::object();
  if (t == "json_object") {
    schema = {{"type", "object"}};
    if (const json* s = Field(*format, "schema")) schema = *s;  // llama-server's extension
  } else if (t == "json_schema") {
    const json* wrapper = Field(*format, "json_schema");
    if (!wrapper || !wrapper->is_object()) {
      return FieldError("response_format.json_schema", "expected {name, schema, strict?}");
    }
    std::string name;
    MMS_RETURN_IF_ERROR(ReadString(*wrapper, "response_format.json_schema", "name", true, &name));
    if (!IsName(name)) {
      return FieldError("response_format.json_schema.name",
                        "expected 1 to 64 of a-z, A-Z, 0-9, _ and -, " + Found((*wrapper)["name"]));
    }
    std::optional<bool> strict;
    if (Status s = ReadBool(*wrapper, "strict", strict); !s.ok()) {
      return InvalidArgument("response_format.json_schema." + std::string(s.message()));
    }
    if (const json* s = Field(*wrapper, "schema")) schema = *s;
    if (!schema.is_object() && !schema.is_boolean()) {
      return FieldError("response_format.json_schema.schema", "expected a JSON schema object, " + Found(schema));
    }
    if (strict.value_or(false)) MMS_RETURN_IF_ERROR(CheckStrict(schema, "response_format.json_schema.schema"));
  } else {
    return FieldError("response_format.type", "expected text, json_object or json_schema, " + Found(*type));
  }
  r.inputs.push_back(StringsTensor(generate::kJsonSchema, {DumpJson(schema)}));
  return Status::Ok();
}

Status ReadChat(const json& body, InferRequest& r) {
  const json* messages = Field(body, "messages");
  if (!messages) return FieldError("messages", "required");
  if (!messages->is_array() || messages->empty()) {
    return FieldError("messages", "expected a non-empty list of messages, " + Found(*messages));
  }
  json list = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    json m;
    MMS_RETURN_IF_ERROR(ReadMessage((*messages)[i], "messages[" + std::to_string(i) + "]", m));
    list.push_back(std::move(m));
  }
  r.inputs.push_back(StringsTensor(generate::kMessages, {DumpJson(list)}));
  std::set<std::string> names;
  MMS_RETURN_IF_ERROR(ReadTools(body, r, names));
  MMS_RETURN_IF_ERROR(ReadToolChoice(body, r, names));
  std::optional<bool> parallel;
  MMS_RETURN_IF_ERROR(ReadBool(body, "parallel_tool_calls", parallel));
  if (parallel) r.parameters[generate::kParallelToolCalls] = *parallel;
  if (const json* kwargs = Field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object() || kwargs->size() > kMaxKwargs) {
      return FieldError("chat_template_kwargs", "expected an object of at most " +
                                                    std::to_string(kMaxKwargs) + " entries, " + Found(*kwargs));
    }
    if (const json* thinking = Field(*kwargs, "enable_thinking"); thinking && !thinking->is_boolean()) {
      return FieldError("chat_template_kwargs.enable_thinking", "expected true or false, " + Found(*thinking));
    }
    r.inputs.push_back(StringsTensor(generate::kTemplateKwargs, {DumpJson(*kwargs)}));
  }
  if (const json* format = Field(body, "reasoning_format")) {
    static const std::set<std::string> kFormats = {"none", "auto", "deepseek", "deepseek-legacy"};
    if (!format->is_string() || !kFormats.contains(format->get<std::string>())) {
      return FieldError("reasoning_format", "expected none, auto, deepseek or deepseek-legacy, " + Found(*format));
    }
    r.parameters[generate::kReasoningFormat] = format->get<std::string>();
  }
  return ReadResponseFormat(body, r);
}

json AssistantMessage(const InferResponse& response) {
  json message = {{"role", "assistant"}, {"content", FirstText(response)}};
  const Tensor* parsed = Output(response, generate::kMessage);
  if (!parsed || parsed->BytesElements().size() != 1) return message;
  const json m = ParseJson(parsed->BytesElements()[0]);
  if (!m.is_object()) return message;
  message["content"] = m.value("content", std::string());
  if (m.contains("reasoning_content")) message["reasoning_content"] = m["reasoning_content"];
  if (m.contains("tool_calls")) {
    message["tool_calls"] = m["tool_calls"];
    if (message["content"] == "") message["content"] = nullptr;  // as OpenAI answers a call
  }
  return message;
}

std::vector<json> Deltas(const InferResponse& partial) {
  std::vector<json> out;
  const Tensor* deltas = Output(partial, generate::kDelta);
  if (!deltas) return out;
  for (std::string_view text : deltas->BytesElements()) {
    json read = ParseJson(text);
    if (read.is_object() && !read.empty()) out.push_back(std::move(read));
  }
  return out;
}

}  // namespace mmserve::openai
