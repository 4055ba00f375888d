// The chat side of a generator, over llama.cpp's `common` library (chat.h, json-schema-to-grammar):
// a conversation rendered with the model's own Jinja template (tools, tool results, reasoning),
// the grammar its answer must follow (tool calls, a JSON schema), and the answer read back as a
// message (content, reasoning_content, tool_calls), whole or as streamed deltas.
//
// The library throws on bad templates, messages and schemas: every entry point here catches and
// returns a Status. It uses its own vendored nlohmann (3.12, not Debian's 3.11), so this header
// exposes no JSON type: JSON crosses it as text. Only llama_chat.cc includes the library.
//
//   model template ──ChatTemplates::Apply(ChatRequest)──▶ ChatPlan { prompt, grammar, stops }
//   generated text ──ChatReader::Update──▶ deltas (streaming) ──Finish──▶ the message (JSON)
#pragma once

#include <llama.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace mmserve {

// What a chat request asks of the template, as JSON text: the OpenAI fields the frontend checked.
struct ChatRequest {
  std::string messages;                     // the messages (a JSON array)
  std::string tools;                        // the tools (a JSON array); empty: none
  std::string tool_choice = "auto";         // auto | none | required
  std::string tool_name;                    // the named form: only this function, required
  std::optional<bool> parallel_tool_calls;  // unset: what the template supports
  std::string json_schema;                  // the schema the answer follows; empty: none
  std::string template_kwargs;              // a JSON object of template variables; empty: none
  std::string reasoning_format;             // none | auto | deepseek | deepseek-legacy
  bool add_generation_prompt = true;
};

// How one answer is read back (opaque: the library's parser).
struct ChatSyntax;

// A rendered conversation: the prompt, and how its answer is sampled and read.
struct ChatPlan {
  std::string prompt;
  std::string grammar;  // GBNF the answer follows; empty: none
  bool grammar_lazy = false;  // the grammar applies from the first trigger on
  std::vector<std::string> trigger_patterns;  // regular expressions (llama.cpp's)
  std::vector<llama_token> trigger_tokens;
  std::string generation_prompt;  // the template's opening of the answer (the grammar's prefill)
  std::vector<std::string> stops;  // stop strings the format adds
  std::string format;              // the library's name for the answer's format
  std::string tools_error;  // non-empty: tools were given that the format cannot call
  std::shared_ptr<const ChatSyntax> syntax;
};

// A model's chat templates: its tokenizer.chat_template (and tool_use variant), or the override
// (a built-in name, or Jinja text); ChatML when the file has none. Not thread-safe: one per
// generator instance.
class ChatTemplates {
 public:
  // `override_template`: empty, a name of llama.cpp's built-in templates, or Jinja source (with
  // no model, not empty). An
  // error names the template's line when it does not parse.
  static Result<std::unique_ptr<ChatTemplates>> Create(const llama_model* model,
                                                       const std::string& override_template);
  ~ChatTemplates();

  // The conversation rendered; an error (InvalidArgument) names what in the request or the
  // template failed. A prompt longer than `max_prompt_bytes` is an error.
  Result<ChatPlan> Apply(const ChatRequest& request, size_t max_prompt_bytes) const;
  // Whether tools reach the template (Jinja; a built-in name renders messages only).
  bool jinja() const { return jinja_; }

 private:
  struct Impl;
  ChatTemplates(std::unique_ptr<Impl> impl, bool jinja);
  std::unique_ptr<Impl> impl_;
  bool jinja_;
};

// Turns llama.cpp's common library's own logging off (once; every entry point here calls it):
// its errors reach mmserve as exceptions, which become Statuses, and its log would print a
// model's output raw (escape sequences included) on stderr.
void SilenceChatLibraryLog();

// Renders a few conversations (plain, system, multi-turn, tools, tool results) with the model's
// own template: what a probe child runs before the server parses the template itself.
Status ProbeChatTemplates(const llama_model* model);

// One streamed change to the answer's message.
struct ChatDelta {
  std::string content;
  std::string reasoning_content;
  int tool_index = -1;  // >= 0: a tool call's delta
  std::string tool_id;  // the first delta of a call carries its id and name
  std::string tool_name;
  std::string tool_arguments;  // a fragment of the arguments' JSON text
};

// Reads one answer as it grows. Partial reads may hold back text that could still become
// markup (a tool call's opening).
class ChatReader {
 public:
  explicit ChatReader(const ChatPlan& plan);
  ~ChatReader();
  // The deltas since the last call, reading `text` (the answer so far; `final`: all of it).
  // An error when the final text is not a valid message of the format (a tool call whose
  // arguments do not parse).
  Result<std::vector<ChatDelta>> Update(const std::string& text, bool final);
  // The message as JSON: {"content", "reasoning_content"?, "tool_calls"?: [{id, type, function:
  // {name, arguments}}]}.
  std::string MessageJson() const;
  bool has_tool_calls() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A JSON schema (JSON text) as a GBNF grammar: bounded first (size, depth, repetition counts,
// patterns), so that no schema can make a grammar too large to build. `field` names the schema
// in errors ("response_format.json_schema.schema").
Result<std::string> SchemaToGrammar(std::string_view schema, const std::string& field);
// The bounds alone: OK, or InvalidArgument naming the part of the schema over a limit.
Status CheckSchemaBounds(std::string_view schema, const std::string& field);

// A JSON delta as OpenAI streams it (JSON text): {"content"} / {"reasoning_content"} /
// {"tool_calls": [{index, id?, type?, function: {name?, arguments}}]}.
std::string ChatDeltaJson(const ChatDelta& delta);

}  // namespace mmserve
