// The chat layer over llama.cpp's common library, without a model: templates given as text,
// schemas bounded and compiled, tool calls read back from an answer's text.
#include "backend/llama/llama_chat.h"

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/paths.h"

namespace mmserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string BundleTemplate(const std::string& name) {
  std::ifstream in(testing::SourceDir() + "/.deps/llama.cpp/models/templates/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* kWeatherTool =
    R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string","maxLength":12}},"required":["city"]}}},)"
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object",)"
    R"("properties":{"zone":{"type":"string"}},"required":["zone"]}}}])";

TEST(SchemaToGrammarTest, CompilesWhatItCanAndNamesWhatItCannot) {
  auto grammar = SchemaToGrammar(R"({"type":"object","properties":{"a":{"type":"integer"}}})", "s");
  ASSERT_TRUE(grammar.ok()) << grammar.status().ToString();
  EXPECT_THAT(*grammar, HasSubstr("root ::="));
  auto error = [](const std::string& schema) {
    auto r = SchemaToGrammar(schema, "response_format.json_schema.schema");
    EXPECT_FALSE(r.ok()) << schema;
    return std::string(r.status().message());
  };
  EXPECT_THAT(error(R"({"type":"string","maxLength":100000})"),
              HasSubstr("response_format.json_schema.schema.maxLength: 100000 is above"));
  EXPECT_THAT(error(R"({"type":"array","items":{"type":"array","minItems":1001}})"),
              HasSubstr("schema.items.minItems"));
  EXPECT_THAT(error(R"({"type":"string","pattern":")" + std::string(20, '(') + "a" +
                    std::string(20, ')') + R"("})"),
              HasSubstr("nested deeper than 16"));
  EXPECT_THAT(error(R"({"type":"string","pattern":"a{2000}"})"), HasSubstr("repetition count"));
  // A fuzz finding: the converter read "{df,2}" as a repetition without bound, which llama.cpp's
  // grammar parser then expanded for minutes.
  EXPECT_THAT(error(R"({"type":"string","pattern":"^[A)Z]{3y-[0-9]{df,2}$"})"),
              HasSubstr("malformed repetition"));
  // And one whose stacked quantifiers ("{9,2}+++...") doubled the grammar with each `+`.
  EXPECT_THAT(error(R"({"type":"string","pattern":"^[}-a0]-{2,9}++++++++++++$"})"),
              HasSubstr("stacked quantifiers"));
  // And a repetition whose least is above its most ({9,2}), which the parser expanded to 2 GB.
  EXPECT_THAT(error(R"({"type":"string","pattern":"^[}-a0-{9,2}a0]--{9,2}$"})"),
              HasSubstr("malformed repetition"));
  auto quantified = SchemaToGrammar(R"({"type":"string","pattern":"^a+b*c{2,3}d?(ef)+$"})", "s");
  EXPECT_TRUE(quantified.ok()) << quantified.status().ToString();
  EXPECT_THAT(error(R"({"type":"wat"})"), HasSubstr("cannot be compiled"));
  EXPECT_THAT(error("{nope"), HasSubstr("not valid JSON"));
  std::string deep = R"({"type":"array","items":)";
  for (int i = 0; i < 40; ++i) deep += R"({"type":"array","items":)";
  deep += R"({"type":"integer"})" + std::string(41, '}');
  EXPECT_THAT(error(deep), HasSubstr("nested deeper than 32"));
  EXPECT_THAT(error(R"({"type":"string","minLength":-1})"), HasSubstr("expected 0 or more"));
}

TEST(ChatTemplatesTest, ATemplateThatDoesNotParseIsAnErrorNamingItsLine) {
  auto made = ChatTemplates::Create(nullptr, "line one\n{% if x %}\nline three {{ broken }\n");
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(std::string(made.status().message()),
              HasSubstr("params.chat_template does not parse"));
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("(template line 3)"));
}

TEST(ChatTemplatesTest, RequiredAndOneCallShapeTheToolGrammar) {
  auto templates = ChatTemplates::Create(nullptr, BundleTemplate("Qwen-Qwen2.5-7B-Instruct.jinja"));
  ASSERT_TRUE(templates.ok()) << templates.status().ToString();
  ChatRequest request{.messages = R"([{"role":"user","content":"Weather?"}])", .tools = kWeatherTool};
  auto plan = (*templates)->Apply(request, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_THAT(plan->prompt, HasSubstr("get_weather"));
  EXPECT_TRUE(plan->grammar_lazy);  // auto: free text until a call opens
  EXPECT_FALSE(plan->trigger_patterns.empty());

  request.tool_choice = "required";
  request.parallel_tool_calls = false;
  plan = (*templates)->Apply(request, 1 << 20);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->grammar_lazy);
  // No free text before the call, and one call.
  EXPECT_THAT(plan->grammar, Not(::testing::ContainsRegex("root ::= [^\n]*until")));
  EXPECT_THAT(plan->grammar, HasSubstr("tool-calls ::= tool-call space\n"));

  request.tool_name = "get_time";
  plan = (*templates)->Apply(request, 1 << 20);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->grammar, HasSubstr("get_time"));
  EXPECT_THAT(plan->grammar, Not(HasSubstr("get_weather")));
  request.tool_name = "nope";
  EXPECT_THAT(std::string((*templates)->Apply(request, 1 << 20).status().message()),
              HasSubstr("tool_choice.function.name: no function named 'nope'"));
  request.tool_name.clear();
  EXPECT_THAT(std::string((*templates)->Apply(request, 10).status().message()),
              HasSubstr("the rendered prompt has"));
}

TEST(ChatReaderTest, ReadsAToolCallWholeAndAsDeltasThatAddUp) {
  auto templates = ChatTemplates::Create(nullptr, BundleTemplate("Qwen-Qwen2.5-7B-Instruct.jinja"));
  ASSERT_TRUE(templates.ok());
  ChatRequest request{.messages = R"([{"role":"user","content":"Weather?"}])", .tools = kWeatherTool};
  auto plan = (*templates)->Apply(request, 1 << 20);
  ASSERT_TRUE(plan.ok());
  const std::string answer =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  ChatReader streamed(*plan);
  std::string name, arguments, id;
  for (size_t n = 1; n <= answer.size(); ++n) {
    auto deltas = streamed.Update(answer.substr(0, n), n == answer.size());
    ASSERT_TRUE(deltas.ok()) << deltas.status().ToString();
    for (const auto& d : *deltas) {
      EXPECT_TRUE(d.content.empty()) << "markup leaked as content: " << d.content;
      if (d.tool_index < 0) continue;
      EXPECT_EQ(d.tool_index, 0);
      name += d.tool_name;
      id += d.tool_id;
      arguments += d.tool_arguments;
    }
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, R"({"city": "Paris"})");  // as the model wrote them
  EXPECT_THAT(id, ::testing::StartsWith("call_"));
  EXPECT_TRUE(streamed.has_tool_calls());
  EXPECT_THAT(streamed.MessageJson(), HasSubstr(R"("name":"get_weather")"));

  // Text the format cannot read is the answer's content, not an error.
  ChatReader odd(*plan);
  auto read = odd.Update("<tool_call>\n{not json</tool_call> and more", true);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(odd.has_tool_calls());
  EXPECT_THAT(odd.MessageJson(), HasSubstr("and more"));
}

TEST(ChatReaderTest, SeparatesReasoningFromContentAsLlamaServerDoes) {
  auto templates = ChatTemplates::Create(nullptr, BundleTemplate("Qwen3.5-4B.jinja"));
  ASSERT_TRUE(templates.ok()) << templates.status().ToString();
  ChatRequest request{.messages = R"([{"role":"user","content":"Why?"}])"};
  for (const std::string format : {"", "deepseek", "none"}) {
    request.reasoning_format = format;
    auto plan = (*templates)->Apply(request, 1 << 20);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ChatReader reader(*plan);
    auto deltas = reader.Update("Because.\n</think>\n\nIt is so.", true);
    ASSERT_TRUE(deltas.ok()) << deltas.status().ToString();
    if (format == "none") {  // thinking left in the content
      EXPECT_THAT(reader.MessageJson(), HasSubstr("</think>")) << reader.MessageJson();
    } else {
      EXPECT_THAT(reader.MessageJson(), HasSubstr(R"("reasoning_content":"Because.\n")"))
          << reader.MessageJson();
      EXPECT_THAT(reader.MessageJson(), HasSubstr(R"("content":"It is so.")"));
    }
  }
}

TEST(ChatDeltaJsonTest, WritesOpenAisDeltaShapes) {
  EXPECT_EQ(ChatDeltaJson({.content = "hi"}), R"({"content":"hi"})");
  EXPECT_EQ(ChatDeltaJson({.tool_index = 1, .tool_id = "call_x", .tool_name = "f", .tool_arguments = ""}),
            R"({"tool_calls":[{"index":1,"id":"call_x","type":"function","function":{"name":"f","arguments":""}}]})");
  EXPECT_EQ(ChatDeltaJson({.tool_index = 0, .tool_arguments = "{\"a\""}),
            R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]})");
}

}  // namespace
}  // namespace mmserve
