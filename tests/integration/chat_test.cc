// Chat templates, structured output and tool calls through the real binary, with generated
// models that carry real templates (tools/gen_models.py: chat-<vocab>.gguf): prompts equal to
// llama-server's for the same GGUF, answers that validate against their schema (checked by
// python3-jsonschema, not by mmserve), tool_choice honoured, and hostile templates and schemas
// answered with clear errors while the server keeps serving.
#include <filesystem>
#include <map>
#include <utility>
#include <memory>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/http_client.h"
#include "testing/models.h"
#include "testing/server_process.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using nlohmann::json;
using testing::GeneratedModel;
using testing::HttpClient;
using testing::ServerProcess;
using ::testing::HasSubstr;

const std::vector<std::string> kChatModels = {"qwen2", "qwen35", "phi-3", "gemma-4", "command-r"};

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {
     "city": {"type": "string", "maxLength": 12},
     "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"],
     "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
   "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}},
     "required": ["zone"], "additionalProperties": false}}}
])");

class ChatTest : public ::testing::Test {
 protected:
  // `extra`: more YAML model entries.
  void Serve(const std::vector<std::string>& models, const std::string& extra = "") {
    std::string yaml = "models:\n";
    for (const auto& m : models) {
      yaml += "  - name: " + m + "\n    path: " + GeneratedModel("chat-" + m + ".gguf") +
              "\n    task: generate\n    timeout_ms: 600000\n"
              "    params: {n_ctx: 4096, n_parallel: 2, n_batch: 256}\n";
    }
    yaml += extra;
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", dir_.Write("m.yaml", yaml).string(), "--port", "0",
                                 "--grpc-port", "-1", "--lock-dir", dir_.path().string()},
        dir_.path() / "mmserve.log");
    ASSERT_TRUE(server_->Start(std::chrono::seconds(120))) << server_->Log();
  }
  json Post(const std::string& target, const json& body, int status = 200) {
    auto res = HttpClient(server_->port()).Post(target, body.dump());
    EXPECT_EQ(res.status, status) << target << " " << body.dump().substr(0, 300) << "\n" << res.body;
    return json::parse(res.body, nullptr, false);
  }
  // Each {schema, text} checked by python3-jsonschema: "" when valid, else why not.
  std::vector<std::string> Validate(const std::vector<std::pair<json, std::string>>& items) {
    std::string lines;
    for (const auto& [schema, text] : items) lines += json{{"schema", schema}, {"text", text}}.dump() + "\n";
    const auto input = dir_.Write("validate.jsonl", lines);
    auto [rc, out] = testing::RunShell("/usr/bin/python3 " + testing::SourceDir() +
                                       "/tests/integration/clients/validate_json.py < " +
                                       input.string() + " 2>&1");
    EXPECT_EQ(rc, 0) << out;
    std::vector<std::string> verdicts;
    std::istringstream stream(out);
    for (std::string line; std::getline(stream, line);) {
      const json v = json::parse(line, nullptr, false);
      verdicts.push_back(v.is_object() && v["ok"] == true ? "" : v.is_object() ? v["why"].dump() : line);
    }
    EXPECT_EQ(verdicts.size(), items.size()) << out;
    return verdicts;
  }

  testing::TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

// Ten conversations: system prompts, several turns, tools, tool calls and their results,
// parallel calls, text parts, an assistant prefill, Unicode, template kwargs.
std::vector<json> Conversations() {
  const json user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
  const json call = {{"role", "assistant"}, {"content", nullptr},
                     {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                      {"function", {{"name", "get_weather"},
                                                    {"arguments", R"({"city":"Paris","unit":"celsius"})"}}}}}}};
  const json result = {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 C, sunny"}};
  json two_calls = call;
  two_calls["tool_calls"].push_back({{"id", "call_2"}, {"type", "function"},
                                     {"function", {{"name", "get_time"}, {"arguments", R"({"zone":"CET"})"}}}});
  auto msg = [](const char* role, json content) { return json{{"role", role}, {"content", std::move(content)}}; };
  auto conv = [](std::vector<json> messages) { return json{{"messages", std::move(messages)}}; };
  json with_tools = conv({user});
  with_tools["tools"] = kTools;
  json after_call = conv({user, call, result});
  after_call["tools"] = kTools;
  json parallel = conv({msg("system", "Use tools."), user, two_calls, result,
                        {{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "14:00"}},
                        msg("user", "Thanks!")});
  parallel["tools"] = kTools;
  json parts = conv({msg("user", json::array({{{"type", "text"}, {"text", "Part one."}},
                                              {{"type", "text"}, {"text", "Part two."}}}))});
  json kwargs = conv({msg("user", "Think first?")});
  kwargs["chat_template_kwargs"] = {{"enable_thinking", false}};
  return {
      conv({msg("user", "Hello")}),
      conv({msg("system", "Be brief."), msg("user", "What is 2+2?")}),
      conv({msg("user", "Hi"), msg("assistant", "Hello! How can I help?"), msg("user", "Tell me a joke.")}),
      with_tools,
      after_call,
      parallel,
      parts,
      conv({msg("user", "Write a haiku"), msg("assistant", "Autumn")}),
      conv({msg("system", "Réponds en français. 東京 🚀"),
            msg("user", std::string(2000, 'a') + " \"quoted\" \\ {{ braces }}")}),
      kwargs,
  };
}

TEST_F(ChatTest, PromptsEqualLlamaServersApplyTemplateForFiveTemplatesAndTenConversations) {
  ASSERT_TRUE(std::filesystem::exists(testing::LlamaTool("llama-server")))
      << "scripts/setup.sh --with-reference-tools builds llama-server";
  Serve(kChatModels);
  const auto conversations = Conversations();
  int compared = 0;
  for (const auto& model : kChatModels) {
    const int port = testing::FreePort();
    ServerProcess peer({"-m", GeneratedModel("chat-" + model + ".gguf"), "--jinja", "--host",
                        "127.0.0.1", "--port", std::to_string(port), "-c", "4096", "-np", "1"},
                       dir_.path() / ("llama-server-" + model + ".log"),
                       testing::LlamaTool("llama-server"));
    ASSERT_TRUE(peer.Start(std::chrono::seconds(60))) << peer.Log();
    HttpClient peer_client(port);
    for (int i = 0; i < 200 && peer_client.Get("/health").status != 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (size_t c = 0; c < conversations.size(); ++c) {
      json body = conversations[c];
      auto theirs = peer_client.Post("/apply-template", body.dump());
      ASSERT_EQ(theirs.status, 200) << model << " conversation " << c << ": " << theirs.body;
      body["model"] = model;
      const json ours = Post("/apply-template", body);
      const json expected = json::parse(theirs.body);
      EXPECT_EQ(ours["prompt"], expected["prompt"]) << model << " conversation " << c;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 50);
}

// Twenty schemas of the kinds extraction pipelines send. Strings are bounded: a random-weight
// model writes until a bound stops it.
std::vector<std::pair<json, bool>> Schemas() {
  auto s = [](const char* text, bool strict) { return std::pair{json::parse(text), strict}; };
  return {
      s(R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false})", true),
      s(R"({"type":"object","properties":{"person":{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false},"active":{"type":"boolean"}},"required":["person","active"],"additionalProperties":false})", true),
      s(R"({"type":"object","properties":{"values":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":4}},"required":["values"]})", false),
      s(R"({"type":"object","properties":{"colour":{"type":"string","enum":["red","green","blue"]}},"required":["colour"],"additionalProperties":false})", true),
      s(R"({"type":"object","properties":{"value":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":5}]}},"required":["value"]})", false),
      s(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":8}},"required":["a"]})", false),
      s(R"({"type":"object","properties":{"items":{"type":"array","maxItems":3,"items":{"type":"object","properties":{"id":{"type":"integer"},"tag":{"enum":["x","y"]}},"required":["id","tag"],"additionalProperties":false}}},"required":["items"],"additionalProperties":false})", true),
      s(R"({"type":"object","properties":{"flag":{"type":"boolean"},"note":{"type":"null"}},"required":["flag","note"]})", false),
      s(R"({"type":"object","properties":{"score":{"type":"number"}},"required":["score"]})", false),
      s(R"({"type":"object","properties":{"n":{"type":"integer","minimum":10,"maximum":99}},"required":["n"]})", false),
      s(R"({"type":"object","properties":{"kind":{"const":"point"},"x":{"type":"integer"},"y":{"type":"integer"}},"required":["kind","x","y"]})", false),
      s(R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2}$"}},"required":["code"]})", false),
      s(R"({"type":"object","properties":{"matrix":{"type":"array","maxItems":2,"items":{"type":"array","maxItems":2,"items":{"type":"integer"}}}},"required":["matrix"]})", false),
      s(R"({"type":"object","properties":{"v":{"oneOf":[{"type":"integer"},{"type":"boolean"}]}},"required":["v"]})", false),
      s(R"({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"],"additionalProperties":false}},"type":"object","properties":{"from":{"$ref":"#/$defs/pt"},"to":{"$ref":"#/$defs/pt"}},"required":["from","to"],"additionalProperties":false})", true),
      s(R"({"type":"array","items":{"type":"string","maxLength":4},"maxItems":3})", false),
      s(R"({"type":"object","properties":{"choice":{"enum":[1,"two",true,null]}},"required":["choice"]})", false),
      s(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"boolean"}},"required":["b"]}]})", false),
      s(R"({"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":6}},"required":["s"],"additionalProperties":false})", true),
      s(R"({"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a","b","c"]},"uniqueItems":false,"maxItems":3},"count":{"type":"integer","minimum":-5,"maximum":5}},"required":["tags","count"],"additionalProperties":false})", true),
  };
}

TEST_F(ChatTest, EveryConstrainedAnswerValidatesAgainstItsSchemaGreedyAndSampled) {
  Serve({"phi-3", "qwen2"});
  std::vector<std::pair<json, std::string>> answers;
  std::vector<std::string> labels;
  const auto schemas = Schemas();
  for (size_t i = 0; i < schemas.size(); ++i) {
    const auto& [schema, strict] = schemas[i];
    for (const json& sampling : {json{{"temperature", 0}}, json{{"temperature", 1}, {"seed", 1}},
                                 json{{"temperature", 1}, {"seed", 2}}}) {
      json body = {{"model", "phi-3"},
                   {"messages", {{{"role", "user"}, {"content", "Answer in JSON."}}}},
                   {"max_tokens", 1500},
                   {"response_format", {{"type", "json_schema"},
                                        {"json_schema", {{"name", "s" + std::to_string(i)},
                                                         {"schema", schema}, {"strict", strict}}}}}};
      body.update(sampling);
      const json out = Post("/v1/chat/completions", body);
      ASSERT_TRUE(out.is_object());
      EXPECT_EQ(out["choices"][0]["finish_reason"], "stop") << "schema " << i << " " << out.dump();
      answers.emplace_back(schema, out["choices"][0]["message"]["content"].get<std::string>());
      labels.push_back("schema " + std::to_string(i) + " " + sampling.dump());
    }
  }
  // /v1/completions takes response_format too (a prompt, no template), on the second model.
  for (size_t i = 0; i < 5; ++i) {
    const json out = Post("/v1/completions", {{"model", "qwen2"}, {"prompt", "JSON:"}, {"max_tokens", 1500},
                                              {"temperature", 0},
                                              {"response_format", {{"type", "json_schema"},
                                                                   {"json_schema", {{"name", "c"}, {"schema", schemas[i].first}}}}}});
    answers.emplace_back(schemas[i].first, out["choices"][0]["text"].get<std::string>());
    labels.push_back("completion, schema " + std::to_string(i));
  }
  const auto verdicts = Validate(answers);
  int valid = 0;
  for (size_t i = 0; i < verdicts.size() && i < answers.size(); ++i) {
    if (verdicts[i].empty()) ++valid;
    else ADD_FAILURE() << labels[i] << ": " << verdicts[i] << "\n" << answers[i].second;
  }
  EXPECT_EQ(valid, 65);
}

json Call(const json& response) { return response["choices"][0]["message"]["tool_calls"]; }

TEST_F(ChatTest, ToolChoiceRequiredNamedAndNoneAreHonouredStreamedAndNot) {
  Serve({"qwen2"}, "  - name: qwen2-isolated\n    path: " + GeneratedModel("chat-qwen2.gguf") +
                       "\n    task: generate\n    isolation: process\n    timeout_ms: 600000\n"
                       "    params: {n_ctx: 4096, n_parallel: 1, n_batch: 256}\n");
  const json messages = {{{"role", "user"}, {"content", "Weather in Paris, and the time?"}}};
  auto request = [&](const json& choice, const json& extra = json::object()) {
    json body = {{"model", "qwen2"}, {"messages", messages}, {"tools", kTools},
                 {"tool_choice", choice}, {"max_tokens", 400}, {"parallel_tool_calls", false}};
    body.update(extra);
    return body;
  };
  std::vector<std::pair<json, std::string>> arguments;
  auto schema_of = [&](const std::string& name) {
    for (const auto& t : kTools) if (t["function"]["name"] == name) return t["function"]["parameters"];
    return json();
  };
  for (const json& sampling : {json{{"temperature", 0}}, json{{"temperature", 1}, {"seed", 7}}}) {
    const json required = Post("/v1/chat/completions", request("required", sampling));
    ASSERT_EQ(Call(required).size(), 1u) << required.dump();
    EXPECT_EQ(required["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_TRUE(required["choices"][0]["message"]["content"].is_null());
    const json call = Call(required)[0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_THAT(call["id"].get<std::string>(), HasSubstr("call_"));
    arguments.emplace_back(schema_of(call["function"]["name"]), call["function"]["arguments"]);

    const json named = Post("/v1/chat/completions",
                            request({{"type", "function"}, {"function", {{"name", "get_time"}}}}, sampling));
    ASSERT_EQ(Call(named).size(), 1u) << named.dump();
    EXPECT_EQ(Call(named)[0]["function"]["name"], "get_time");
    arguments.emplace_back(schema_of("get_time"), Call(named)[0]["function"]["arguments"]);

    json short_answer = sampling;
    short_answer["max_tokens"] = 48;  // no call is the point, not the length
    const json none = Post("/v1/chat/completions", request("none", short_answer));
    EXPECT_FALSE(none["choices"][0]["message"].contains("tool_calls")) << none.dump();
    EXPECT_NE(none["choices"][0]["finish_reason"], "tool_calls");
  }
  for (const auto& verdict : Validate(arguments)) EXPECT_EQ(verdict, "");

  // Streamed: OpenAI's tool-call deltas add up to the same call as the whole answer.
  const json whole = Post("/v1/chat/completions", request("required", {{"temperature", 0}}));
  json streamed_body = request("required", {{"temperature", 0}, {"stream", true}});
  auto res = HttpClient(server_->port()).Post("/v1/chat/completions", streamed_body.dump());
  ASSERT_EQ(res.status, 200);
  std::string name, args, id, finish;
  std::istringstream events(res.body);
  for (std::string line; std::getline(events, line);) {
    if (!line.starts_with("data: {")) continue;
    const json chunk = json::parse(line.substr(6));
    const json& choice = chunk["choices"][0];
    if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    const json& d = choice["delta"]["tool_calls"][0];
    EXPECT_EQ(d["index"], 0);
    if (d.contains("id")) id += d["id"].get<std::string>();
    if (d["function"].contains("name")) name += d["function"]["name"].get<std::string>();
    args += d["function"].value("arguments", "");
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(name, Call(whole)[0]["function"]["name"]);
  EXPECT_EQ(args, Call(whole)[0]["function"]["arguments"]);
  EXPECT_FALSE(id.empty());

  // An isolated model renders and constrains in its worker: the same greedy call.
  json isolated = request("required", {{"temperature", 0}});
  isolated["model"] = "qwen2-isolated";
  EXPECT_EQ(Call(Post("/v1/chat/completions", isolated))[0]["function"],
            Call(whole)[0]["function"]);
}

TEST_F(ChatTest, TheOfficialOpenAiClientReadsToolCallsStreamedAndNot) {
  const std::string modules = testing::SourceDir() + "/.deps/node/node_modules";
  ASSERT_TRUE(std::filesystem::exists(modules + "/openai/package.json"))
      << "the openai npm package is missing: scripts/test.sh installs it";
  Serve({"qwen2"});
  auto [rc, out] = testing::RunShell("NODE_PATH=" + modules + " node " + testing::SourceDir() +
                                     "/tests/integration/clients/openai_tools_client.cjs " +
                                     std::to_string(server_->port()) + " 2>&1");
  ASSERT_EQ(rc, 0) << out << server_->Log();
  const json seen = json::parse(out.substr(out.rfind("\n{") == std::string::npos ? 0 : out.rfind("\n{") + 1));
  // One call when parallel calls are off; with them on, a random-weight model goes on calling
  // until max_tokens, and every call but a cut last one is whole.
  ASSERT_EQ(seen["single"]["calls"].size(), 1u) << seen.dump();
  EXPECT_TRUE(seen["single"]["calls"][0]["arguments_parse"].get<bool>()) << seen.dump();
  EXPECT_EQ(seen["single"]["finish"], "tool_calls");
  const json& parallel = seen["parallel"]["calls"];
  ASSERT_GE(parallel.size(), 2u) << seen.dump();
  const size_t whole = seen["parallel"]["finish"] == "length" ? parallel.size() - 1 : parallel.size();
  for (size_t i = 0; i < parallel.size(); ++i) {
    EXPECT_THAT(parallel[i]["name"].get<std::string>(), ::testing::AnyOf("get_weather", "get_time"));
    if (i < whole) {
      EXPECT_TRUE(parallel[i]["arguments_parse"].get<bool>()) << parallel[i].dump();
    }
  }
  EXPECT_EQ(seen["stream"]["name"], "get_time");
  EXPECT_EQ(seen["stream"]["arguments"], seen["named"]["arguments"]);
  EXPECT_EQ(seen["stream"]["finish"], "tool_calls");
}

TEST_F(ChatTest, HostileTemplatesSchemasAndToolChoicesAreClearErrorsAndServingGoesOn) {
  // Models whose templates do not parse, throw, recurse without end, loop, or are huge.
  const std::vector<std::pair<std::string, std::string>> templates = {
      {"unparsed", "{% for m in messages %}{{ m.content }{% endfor %}"},
      {"throws", "{{ raise_exception('this template refuses') }}"},
      {"recurses", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"},
      {"loops", "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"},
      {"huge", "{% for m in messages %}{{ m.content }}{% endfor %}" + std::string(600000, 'x')},
  };
  std::string extra;
  std::map<std::string, json> entries;
  for (const auto& [name, text] : templates) {
    const auto file = dir_.Write(name + ".jinja", text);
    const auto model = dir_.path() / (name + ".gguf");
    auto [rc, out] = testing::RunShell("PYTHONPATH=" + testing::SourceDir() + "/.deps/llama.cpp/gguf-py /usr/bin/python3 " +
                                       testing::SourceDir() + "/tools/gen_chat_model.py " + model.string() + " " + file.string() + " 2>&1");
    ASSERT_EQ(rc, 0) << out;
    extra += "  - name: " + name + "\n    path: " + model.string() +
             "\n    task: generate\n    params: {n_ctx: 1024, n_parallel: 1}\n";
    entries[name] = {{"name", name}, {"path", model.string()}, {"task", "generate"},
                     {"params", {{"n_ctx", 1024}, {"n_parallel", 1}}}};
  }
  // validate names each broken one (the probe renders the template in a child); huge renders.
  const auto config = dir_.Write("hostile.yaml", "models:\n" + extra);
  auto [rc, out] = ServerProcess::Run({"validate", config.string()});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_THAT(out, HasSubstr("Expected }} (Got }) (template line 1)"));
  EXPECT_THAT(out, HasSubstr("this template refuses"));
  EXPECT_THAT(out, HasSubstr("crashed on 'recurses.gguf' (SIGSEGV"));
  EXPECT_THAT(out, HasSubstr("crashed on 'loops.gguf' (SIGXCPU, its CPU time limit)"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("'huge.gguf'")));

  // A running server refuses to add them (the repository API), and goes on serving.
  Serve({"qwen2"}, "  - name: huge\n    path: " + entries["huge"]["path"].get<std::string>() +
                       "\n    task: generate\n    params: {n_ctx: 1024, n_parallel: 1}\n");
  const json hi = {{{"role", "user"}, {"content", "hi"}}};
  for (const char* name : {"unparsed", "throws", "recurses"}) {
    auto res = HttpClient(server_->port()).Post("/v2/repository/models/" + std::string(name) + "/load",
                                                json{{"parameters", {{"config", entries[name]}}}}.dump());
    EXPECT_EQ(res.status, 400) << name << " " << res.body;
    EXPECT_THAT(res.body, HasSubstr(std::string(name) + ".gguf")) << res.body;
  }
  json e = Post("/v1/chat/completions", {{"model", "huge"}, {"messages", hi}}, 400);
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("the rendered prompt has"));

  // Schemas that explode when expanded, and a tool_choice naming a missing function.
  auto schema_error = [&](const json& schema) {
    const json r = Post("/v1/chat/completions", {{"model", "qwen2"}, {"messages", hi},
                        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}}, 400);
    EXPECT_EQ(r["error"].value("param", json("")).dump().rfind("\"response_format.json_schema.schema", 0), 0u) << r.dump();
    return r["error"].value("message", std::string());
  };
  EXPECT_THAT(schema_error({{"type", "string"}, {"maxLength", 100000}}), HasSubstr("maxLength: 100000 is above"));
  EXPECT_THAT(schema_error({{"type", "array"}, {"minItems", 5000}}), HasSubstr("minItems"));
  EXPECT_THAT(schema_error({{"type", "string"}, {"pattern", std::string(40, '(') + "a" + std::string(40, ')')}}),
              HasSubstr("nested deeper"));
  EXPECT_THAT(schema_error({{"type", "string"}, {"pattern", "^a{5000}$"}}), HasSubstr("repetition count"));
  EXPECT_THAT(schema_error({{"type", "nonsense"}}), HasSubstr("cannot be compiled"));
  e = Post("/v1/chat/completions", {{"model", "qwen2"}, {"messages", hi}, {"tools", kTools},
                                    {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}, 400);
  EXPECT_EQ(e["error"]["param"], "tool_choice.function.name");
  e = Post("/v1/chat/completions", {{"model", "qwen2"}, {"messages", hi},
                                    {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"strict", true},
                                     {"schema", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}}}}}}}}, 400);
  EXPECT_EQ(e["error"]["param"], "response_format.json_schema.schema.additionalProperties");
  e = Post("/v1/chat/completions", {{"model", "qwen2"}, {"messages", hi}, {"tools", {{{"type", "function"}}}}}, 400);
  EXPECT_EQ(e["error"]["param"], "tools[0].function");
  e = Post("/v1/chat/completions", {{"model", "qwen2"}, {"messages", hi}, {"reasoning_format", "loud"}}, 400);
  EXPECT_EQ(e["error"]["param"], "reasoning_format");
  e = Post("/v1/chat/completions", {{"model", "qwen2"}, {"messages", {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{oops"}}}}}}}}}}, 400);
  EXPECT_EQ(e["error"]["param"], "messages[0].tool_calls[0].function.arguments");
  // And the server still serves.
  const json ok = Post("/v1/chat/completions", {{"model", "qwen2"}, {"messages", hi}, {"max_tokens", 4}});
  EXPECT_EQ(ok["choices"][0]["message"]["role"], "assistant");
}

}  // namespace
}  // namespace mmserve
