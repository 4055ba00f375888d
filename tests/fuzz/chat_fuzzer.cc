// Fuzzes what a chat request and a model's answer go through in the generator
// (backend/llama/llama_chat.h), with a real template (Qwen2.5's, from the bundle): the first
// byte picks the part — messages rendered, tools rendered (with tool_choice required, so their
// schemas become grammars), or an answer's text read back as a message prefix by prefix, as a
// stream is. Every input must end in a value or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "backend/llama/llama_chat.h"

namespace {

const mmserve::ChatTemplates* Templates() {
  static std::unique_ptr<mmserve::ChatTemplates> templates = [] {
    std::ifstream in(".deps/llama.cpp/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    std::stringstream text;
    text << in.rdbuf();
    auto made = mmserve::ChatTemplates::Create(nullptr, text.str().empty() ? "chatml" : text.str());
    if (!made.ok()) std::abort();
    return std::move(*made);
  }();
  return templates.get();
}

const char* kTools =
    R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",)"
    R"("properties":{"a":{"type":"string","maxLength":8}},"required":["a"]}}}])";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const mmserve::ChatTemplates* templates = Templates();
  switch (data[0] % 3) {
    case 0: {
      mmserve::ChatRequest request{.messages = text};
      (void)templates->Apply(request, 1 << 20);
      break;
    }
    case 1: {
      mmserve::ChatRequest request{.messages = R"([{"role":"user","content":"x"}])", .tools = text,
                                   .tool_choice = "required"};
      (void)templates->Apply(request, 1 << 20);
      break;
    }
    default: {
      mmserve::ChatRequest request{.messages = R"([{"role":"user","content":"x"}])", .tools = kTools};
      auto plan = templates->Apply(request, 1 << 20);
      if (!plan.ok()) std::abort();
      mmserve::ChatReader reader(*plan);
      // Prefixes as a stream grows (a few, so that one input stays fast), then the whole.
      for (size_t n = 1; n < text.size(); n += 1 + text.size() / 8) (void)reader.Update(text.substr(0, n), false);
      (void)reader.Update(text, true);
      (void)reader.MessageJson();
    }
  }
  return 0;
}
