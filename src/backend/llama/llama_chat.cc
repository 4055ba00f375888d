// llama.cpp's chat library behind llama_chat.h. This file alone includes it (and its vendored
// nlohmann, through chat.h), and catches everything it throws.
#include "backend/llama/llama_chat.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "chat.h"
#include "common/logging.h"
#include "json-schema-to-grammar.h"
#include "log.h"

namespace mmserve {
namespace {

using ojson = common_json;  // nlohmann::ordered_json, the library's

constexpr size_t kMaxErrorChars = 400;

std::string Short(std::string text) {
  if (text.size() > kMaxErrorChars) text = text.substr(0, kMaxErrorChars) + "...";
  return text;
}

// A chat request's JSON texts, parsed once (without exceptions; the frontend checked their
// depth already). An absent field is an empty array or object.
struct ParsedRequest {
  ojson messages, tools, kwargs;
};

Result<ParsedRequest> Parse(const ChatRequest& request) {
  ParsedRequest parsed{.messages = ojson::parse_no_throw(request.messages),
                       .tools = request.tools.empty() ? ojson::array()
                                                      : ojson::parse_no_throw(request.tools),
                       .kwargs = request.template_kwargs.empty()
                                     ? ojson::object()
                                     : ojson::parse_no_throw(request.template_kwargs)};
  for (const ojson* value : {&parsed.messages, &parsed.tools, &parsed.kwargs}) {
    if (value->is_discarded()) return InvalidArgument("the chat request: not valid JSON");
  }
  return parsed;
}

std::string Dump(const ojson& value) { return value.dump_safe(); }

// The line of a template error: the library's message quotes the source around the error
// ("...text↵text...\n      ^"); the quote is found in the source again.
std::string TemplateErrorWithLine(const std::string& message, const std::string& source) {
  const size_t open = message.find("\n...");
  const size_t caret = message.rfind('^');
  std::string first_line = message.substr(0, message.find('\n'));
  if (open == std::string::npos || caret == std::string::npos || caret < open) return first_line;
  const size_t quote_end = message.find("...\n", open + 4);
  if (quote_end == std::string::npos) return first_line;
  std::string quote = message.substr(open + 4, quote_end - open - 4);
  for (size_t at; (at = quote.find("\xE2\x86\xB5")) != std::string::npos;) quote.replace(at, 3, "\n");
  const size_t line_start = message.rfind('\n', caret) + 1;
  const size_t offset = caret - line_start >= 3 ? caret - line_start - 3 : 0;
  const size_t found = source.find(quote);
  if (found == std::string::npos) return first_line;
  const size_t pos = std::min(source.size(), found + offset);
  const auto line = 1 + std::count(source.begin(), source.begin() + static_cast<ptrdiff_t>(pos), '\n');
  return first_line + " (template line " + std::to_string(line) + ")";
}

bool IsBuiltinTemplateName(const std::string& name) {
  std::vector<const char*> names(128);
  int32_t n = llama_chat_builtin_templates(names.data(), names.size());
  if (n > static_cast<int32_t>(names.size())) {
    names.resize(static_cast<size_t>(n));
    n = llama_chat_builtin_templates(names.data(), names.size());
  }
  for (int32_t i = 0; i < n; ++i) {
    if (name == names[static_cast<size_t>(i)]) return true;
  }
  return false;
}

// tool_choice "required" as OpenAI means it: the answer is tool calls. llama.cpp's grammars let
// free content come first ("root ::= <opening> space until-N? tool-calls": text until the first
// call's opening), so an answer that never opens a call follows the grammar. The content rule
// just before the call rule in `root` is dropped; a grammar of another shape stays as it is.
std::string RequireCallFirst(std::string grammar) {
  const size_t root = grammar.find("\nroot ::= ") != std::string::npos
                          ? grammar.find("\nroot ::= ") + 1
                          : (grammar.starts_with("root ::= ") ? 0 : std::string::npos);
  if (root == std::string::npos) return grammar;
  const size_t end = std::min(grammar.find('\n', root), grammar.size());
  std::vector<std::string> tokens;
  for (size_t i = root; i < end;) {
    const size_t next = std::min(grammar.find(' ', i), end);
    tokens.push_back(grammar.substr(i, next - i));
    i = next + 1;
  }
  size_t call = tokens.size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].starts_with("tool-call")) call = i;
  }
  size_t k = call;
  while (k > 0 && tokens[k - 1] == "space") --k;
  if (call == tokens.size() || k == 0 || !tokens[k - 1].starts_with("until-")) return grammar;
  tokens.erase(tokens.begin() + static_cast<ptrdiff_t>(k - 1));
  std::string line;
  for (const auto& token : tokens) line += (line.empty() ? "" : " ") + token;
  return grammar.replace(root, end - root, line);
}

// parallel_tool_calls: false as OpenAI means it: one call. The library's generated parser for
// templates with one tag per call repeats the tag regardless ("tool-calls ::= (tool-call
// space)+"); that rule is made a single call.
std::string OneCallOnly(std::string grammar) {
  const std::string repeated = "\ntool-calls ::= (tool-call space)+\n";
  if (const size_t at = grammar.find(repeated); at != std::string::npos) {
    grammar.replace(at, repeated.size(), "\ntool-calls ::= tool-call space\n");
  }
  return grammar;
}

}  // namespace

void SilenceChatLibraryLog() {
  static const bool silenced = [] {
    common_log_set_verbosity_thold(0);  // below LOG_LEVEL_ERROR: nothing is written
    return true;
  }();
  (void)silenced;
}

struct ChatSyntax {
  common_chat_parser_params params;
};

struct ChatTemplates::Impl {
  common_chat_templates_ptr templates;
  std::string source;
};

ChatTemplates::ChatTemplates(std::unique_ptr<Impl> impl, bool jinja)
    : impl_(std::move(impl)), jinja_(jinja) {}
ChatTemplates::~ChatTemplates() = default;

Result<std::unique_ptr<ChatTemplates>> ChatTemplates::Create(const llama_model* model,
                                                             const std::string& override_template) {
  SilenceChatLibraryLog();
  // A built-in name renders through llama.cpp's own formatter (no Jinja, no tools), except
  // chatml, which the library has as Jinja.
  const bool builtin = !override_template.empty() && override_template != "chatml" &&
                       IsBuiltinTemplateName(override_template);
  auto impl = std::make_unique<Impl>();
  const char* own = model ? llama_model_chat_template(model, nullptr) : nullptr;
  impl->source = !override_template.empty() ? override_template : own ? own : "chatml";
  const std::string where = override_template.empty() ? "the model's tokenizer.chat_template"
                                                      : "params.chat_template";
  try {
    // Parsed once here first: the library rethrows a parse error sliced to std::exception,
    // which loses the message and the line.
    if (!builtin) common_chat_template parsed(impl->source == "chatml" ? "" : impl->source, "", "");
    impl->templates = common_chat_templates_init(model, override_template);
  } catch (const std::exception& e) {
    return InvalidArgument(where + " does not parse: " +
                           Short(TemplateErrorWithLine(e.what(), impl->source)));
  }
  if (!impl->templates) return InvalidArgument("the chat template could not be made");
  return std::unique_ptr<ChatTemplates>(new ChatTemplates(std::move(impl), !builtin));
}

namespace {

// The request's fields as the library's inputs; throws on what it cannot read.
common_chat_templates_inputs Inputs(const ChatRequest& request, const ParsedRequest& parsed,
                                    const common_chat_templates* t, bool jinja) {
  common_chat_templates_inputs in;
  in.use_jinja = jinja;
  in.messages = common_chat_msgs_parse_oaicompat(parsed.messages);
  ojson tools = parsed.tools;
  in.tool_choice = common_chat_tool_choice_parse_oaicompat(request.tool_choice);
  if (!request.tool_name.empty()) {
    // The named form: only that function, and a call to it is required.
    ojson named = ojson::array();
    for (size_t i = 0; tools.is_array() && i < tools.size(); ++i) {
      const ojson& tool = tools[i];
      if (tool.is_object() && tool.contains("function") && tool["function"].is_object() &&
          tool["function"].value("name", "") == request.tool_name) {
        named.push_back(tool);
      }
    }
    if (named.empty()) {
      throw std::invalid_argument("tool_choice.function.name: no function named '" +
                                  request.tool_name + "' in tools");
    }
    tools = std::move(named);
    in.tool_choice = COMMON_CHAT_TOOL_CHOICE_REQUIRED;
  }
  in.tools = common_chat_tools_parse_oaicompat(tools);
  if (!jinja && !in.tools.empty()) {
    throw std::invalid_argument("tools: this model's chat template is a built-in name "
                                "(params.chat_template), which renders no tools");
  }
  in.json_schema = request.json_schema;
  auto caps = common_chat_templates_get_caps(t);
  in.parallel_tool_calls =
      request.parallel_tool_calls.value_or(caps["supports_parallel_tool_calls"]);
  in.add_generation_prompt = request.add_generation_prompt;
  // As llama-server: a conversation ending with an assistant message continues that message.
  if (!in.messages.empty() && in.messages.back().role == "assistant") {
    if (in.messages.size() >= 2 && in.messages[in.messages.size() - 2].role == "assistant") {
      throw std::invalid_argument("messages: two assistant messages at the end");
    }
    if (!in.messages.back().tool_calls.empty()) {
      throw std::invalid_argument("messages: the last assistant message has tool_calls; "
                                  "add their results as role tool messages");
    }
    in.continue_final_message = COMMON_CHAT_CONTINUATION_AUTO;
    in.add_generation_prompt = false;
  }
  in.reasoning_format = common_reasoning_format_from_name(
      request.reasoning_format.empty() ? "deepseek" : request.reasoning_format);
  in.enable_thinking = common_chat_templates_support_enable_thinking(t);
  for (const auto& entry : parsed.kwargs.items()) {
    in.chat_template_kwargs[entry.key()] = Dump(entry.value());
  }
  if (auto it = in.chat_template_kwargs.find("enable_thinking"); it != in.chat_template_kwargs.end()) {
    if (it->second == "true") in.enable_thinking = true;
    else if (it->second == "false") in.enable_thinking = false;
    else throw std::invalid_argument("chat_template_kwargs.enable_thinking: expected a boolean");
  }
  return in;
}

}  // namespace

namespace {

// The request's schemas (the answer's, each tool's parameters) within the grammar bounds.
Status CheckSchemas(const ChatRequest& request, const ojson& tools) {
  if (!request.json_schema.empty()) {
    // Compiled alone first: the library's own error for a schema it cannot take says nothing.
    MMS_RETURN_IF_ERROR(
        SchemaToGrammar(request.json_schema, "response_format.json_schema.schema").status());
  }
  for (size_t i = 0; tools.is_array() && i < tools.size(); ++i) {  // parameters: grammars too
    const ojson& tool = tools[i];
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
        !tool["function"].contains("parameters")) {
      continue;
    }
    MMS_RETURN_IF_ERROR(SchemaToGrammar(tool["function"]["parameters"].dump_safe(),
                                        "tools[" + std::to_string(i) + "].function.parameters")
                            .status());
  }
  return Status::Ok();
}

}  // namespace

namespace {

// The library's grammar triggers as llama.cpp's lazy grammar takes them (as its common sampler
// turns them): words escaped, full patterns anchored, tokens as they are.
void AddTriggers(const std::vector<common_grammar_trigger>& triggers, ChatPlan& plan) {
  for (const auto& trigger : triggers) {
    switch (trigger.type) {
      case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:
        plan.trigger_tokens.push_back(trigger.token);
        break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:
        plan.trigger_patterns.push_back(regex_escape(trigger.value));
        break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:
        plan.trigger_patterns.push_back(trigger.value);
        break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
        const std::string& p = trigger.value;
        plan.trigger_patterns.push_back(
            p.empty() ? "^$" : (p.front() != '^' ? "^" : "") + p + (p.back() != '$' ? "$" : ""));
        break;
      }
    }
  }
}

}  // namespace

Result<ChatPlan> ChatTemplates::Apply(const ChatRequest& request, size_t max_prompt_bytes) const {
  MMS_ASSIGN_OR_RETURN(const ParsedRequest parsed, Parse(request));
  MMS_RETURN_IF_ERROR(CheckSchemas(request, parsed.tools));
  common_chat_params params;
  common_chat_templates_inputs in;
  try {
    in = Inputs(request, parsed, impl_->templates.get(), jinja_);
  } catch (const std::exception& e) {
    return InvalidArgument(Short(e.what()));
  }
  try {
    params = common_chat_templates_apply(impl_->templates.get(), in);
  } catch (const std::exception& e) {
    return InvalidArgument("the chat template failed on this conversation: " +
                           Short(TemplateErrorWithLine(e.what(), impl_->source)));
  }
  const bool calls = !in.tools.empty() && in.tool_choice != COMMON_CHAT_TOOL_CHOICE_NONE;
  if (calls && in.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED && !params.grammar_lazy) {
    params.grammar = RequireCallFirst(std::move(params.grammar));
  }
  if (calls && !in.parallel_tool_calls) params.grammar = OneCallOnly(std::move(params.grammar));
  if (params.grammar.size() > (size_t{512} << 10)) {
    return InvalidArgument("the answer's grammar would have " +
                           std::to_string(params.grammar.size()) + " bytes; at most 512 KiB");
  }
  if (params.prompt.size() > max_prompt_bytes) {
    return InvalidArgument("messages: the rendered prompt has " +
                           std::to_string(params.prompt.size()) + " bytes, more than this "
                           "model's context can hold");
  }
  ChatPlan plan;
  plan.prompt = std::move(params.prompt);
  plan.grammar = std::move(params.grammar);
  plan.grammar_lazy = params.grammar_lazy;
  AddTriggers(params.grammar_triggers, plan);
  plan.generation_prompt = params.generation_prompt;
  plan.stops = std::move(params.additional_stops);
  plan.format = common_chat_format_name(params.format);
  if (calls && plan.grammar.empty()) {
    // The template has no tool-call format llama.cpp can read: tools would do nothing.
    plan.tools_error = "tools: this model's chat template has no tool calls llama.cpp can read "
                       "(format " + plan.format + "); send tool_choice: none, or give the model "
                       "a template that calls tools (params.chat_template)";
  }
  auto syntax = std::make_shared<ChatSyntax>();
  syntax->params = common_chat_parser_params(params);
  syntax->params.reasoning_format = in.reasoning_format;
  syntax->params.parse_tool_calls = !in.tools.empty() && in.tool_choice != COMMON_CHAT_TOOL_CHOICE_NONE;
  syntax->params.is_continuation = in.continue_final_message != COMMON_CHAT_CONTINUATION_NONE;
  try {
    if (!params.parser.empty()) syntax->params.parser.load(params.parser);
  } catch (const std::exception& e) {
    return Internal("the chat format's parser did not load: " + Short(e.what()));
  }
  plan.syntax = std::move(syntax);
  return plan;
}

Status ProbeChatTemplates(const llama_model* model) {
  MMS_ASSIGN_OR_RETURN(auto templates, ChatTemplates::Create(model, ""));
  const std::string tools =
      R"([{"type":"function","function":{"name":"get_weather","description":"Weather in a city",)"
      R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";
  const std::vector<ChatRequest> conversations = {
      {.messages = R"([{"role":"user","content":"Hello"}])"},
      {.messages = R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},)"
                   R"({"role":"assistant","content":"Hello."},{"role":"user","content":"Bye"}])"},
      {.messages = R"([{"role":"user","content":"Weather in Paris?"}])", .tools = tools},
      {.messages = R"([{"role":"user","content":"Weather in Paris?"},{"role":"assistant",)"
                   R"("content":null,"tool_calls":[{"id":"call_1","type":"function","function":)"
                   R"({"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},)"
                   R"({"role":"tool","tool_call_id":"call_1","content":"sunny"}])",
       .tools = tools},
  };
  for (const auto& conversation : conversations) {
    MMS_RETURN_IF_ERROR(templates->Apply(conversation, size_t{64} << 20).status());
  }
  return Status::Ok();
}

struct ChatReader::Impl {
  common_chat_parser_params params;
  common_chat_msg message;
  std::vector<std::string> ids;
};

ChatReader::ChatReader(const ChatPlan& plan) : impl_(std::make_unique<Impl>()) {
  if (plan.syntax) impl_->params = plan.syntax->params;
}
ChatReader::~ChatReader() = default;

namespace {

// OpenAI's shape of a call id: "call_" and random characters (clients only echo it back).
std::string NewCallId() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static const char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kDigits[random() % (sizeof(kDigits) - 1)];
  return id;
}

std::vector<ChatDelta> ToDeltas(const std::vector<common_chat_msg_diff>& diffs) {
  std::vector<ChatDelta> out;
  for (const auto& d : diffs) {
    ChatDelta delta{.content = d.content_delta, .reasoning_content = d.reasoning_content_delta};
    if (d.tool_call_index != std::string::npos) {
      delta.tool_index = static_cast<int>(d.tool_call_index);
      delta.tool_id = d.tool_call_delta.id;
      delta.tool_name = d.tool_call_delta.name;
      delta.tool_arguments = d.tool_call_delta.arguments;
    }
    out.push_back(std::move(delta));
  }
  return out;
}

}  // namespace

Result<std::vector<ChatDelta>> ChatReader::Update(const std::string& text, bool final) {
  try {
    common_chat_msg next = common_chat_parse(text, !final, impl_->params);
    if (next.empty() && !final) return std::vector<ChatDelta>();
    next.set_tool_call_ids(impl_->ids, NewCallId);
    auto deltas = ToDeltas(common_chat_msg_diff::compute_diffs(impl_->message, next));
    impl_->message = std::move(next);
    return deltas;
  } catch (const std::exception& e) {
    if (!final) return std::vector<ChatDelta>();  // may read once more text comes
    // A whole answer the format's parser refuses (text that looks like markup it cannot read):
    // the answer is its text, as content, rather than an error for a request that was fine.
    spdlog::debug("chat: the answer does not read as its format ({}); answered as content",
                  Short(e.what()));
    std::vector<ChatDelta> deltas;
    if (impl_->message.tool_calls.empty() && text.starts_with(impl_->message.content)) {
      deltas.push_back({.content = text.substr(impl_->message.content.size())});
    }
    impl_->message = common_chat_msg{};
    impl_->message.role = "assistant";
    impl_->message.content = text;
    return deltas;
  }
}

bool ChatReader::has_tool_calls() const { return !impl_->message.tool_calls.empty(); }

std::string ChatReader::MessageJson() const {
  const common_chat_msg& m = impl_->message;
  ojson out = ojson::object();
  out["content"] = m.content;
  if (!m.reasoning_content.empty()) out["reasoning_content"] = m.reasoning_content;
  if (!m.tool_calls.empty()) {
    ojson calls = ojson::array();
    for (const auto& call : m.tool_calls) {
      ojson function = ojson::object();
      function["name"] = call.name;
      function["arguments"] = call.arguments;
      ojson entry = ojson::object();
      entry["id"] = call.id;
      entry["type"] = "function";
      entry["function"] = std::move(function);
      calls.push_back(std::move(entry));
    }
    out["tool_calls"] = std::move(calls);
  }
  return Dump(out);
}

std::string ChatDeltaJson(const ChatDelta& d) {
  ojson out = ojson::object();
  if (d.tool_index >= 0) {
    ojson call = ojson::object();
    call["index"] = d.tool_index;
    if (!d.tool_id.empty()) call["id"] = d.tool_id;
    if (!d.tool_id.empty()) call["type"] = "function";
    ojson function = ojson::object();
    if (!d.tool_name.empty()) function["name"] = d.tool_name;
    function["arguments"] = d.tool_arguments;
    call["function"] = std::move(function);
    ojson calls = ojson::array();
    calls.push_back(std::move(call));
    out["tool_calls"] = std::move(calls);
  }
  if (!d.content.empty()) out["content"] = d.content;
  if (!d.reasoning_content.empty()) out["reasoning_content"] = d.reasoning_content;
  return Dump(out);
}

}  // namespace mmserve
