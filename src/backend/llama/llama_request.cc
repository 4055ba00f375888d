#include "backend/llama/llama_request.h"

#include <cctype>
#include <exception>

#include "backend/generate_contract.h"
#include "backend/llama/llama_encoder.h"
#include "common/json.h"

namespace mmserve {
namespace {

// ROLES and CONTENTS (KServe's chat inputs) as OpenAI messages.
Result<std::string> MessagesOf(const Tensor& roles, const Tensor& contents) {
  const auto r = roles.BytesElements();
  const auto c = contents.BytesElements();
  if (r.size() != c.size() || r.empty()) {
    return InvalidArgument("ROLES and CONTENTS: expected the same number (at least one) of "
                           "elements, found " + std::to_string(r.size()) + " and " +
                           std::to_string(c.size()));
  }
  std::string messages = "[";
  for (size_t i = 0; i < r.size(); ++i) {
    if (i > 0) messages += ',';
    messages += "{\"role\":" + DumpJson(std::string(r[i])) +
                ",\"content\":" + DumpJson(std::string(c[i])) + "}";
  }
  return messages + "]";
}

}  // namespace

Result<std::optional<std::string>> OneText(const InferRequest& r, const char* name) {
  const Tensor* t = r.input(name);
  if (!t) return std::optional<std::string>();
  const auto texts = t->BytesElements();
  if (texts.size() != 1) return InvalidArgument(std::string(name) + ": expected one element");
  return std::optional<std::string>(std::string(texts[0]));
}

// The request's chat inputs and parameters as the template's request.
Result<ChatRequest> ChatRequestOf(const InferRequest& r) {
  ChatRequest chat;
  MMS_ASSIGN_OR_RETURN(auto messages, OneText(r, generate::kMessages));
  const Tensor* roles = r.input(generate::kRoles);
  const Tensor* contents = r.input(generate::kContents);
  if (messages && (roles || contents)) {
    return InvalidArgument("give chat messages either as MESSAGES or as ROLES and CONTENTS");
  }
  if (messages) {
    chat.messages = std::move(*messages);
  } else {
    if (!roles || !contents) {
      return InvalidArgument("give either PROMPT, or chat messages as ROLES and CONTENTS");
    }
    MMS_ASSIGN_OR_RETURN(chat.messages, MessagesOf(*roles, *contents));
  }
  MMS_ASSIGN_OR_RETURN(auto tools, OneText(r, generate::kTools));
  MMS_ASSIGN_OR_RETURN(auto kwargs, OneText(r, generate::kTemplateKwargs));
  chat.tools = tools.value_or("");
  chat.template_kwargs = kwargs.value_or("");
  if (std::string choice = StringParam(r.parameters, generate::kToolChoice); !choice.empty()) {
    chat.tool_choice = std::move(choice);
  }
  chat.tool_name = StringParam(r.parameters, generate::kToolName);
  if (r.parameters.contains(generate::kParallelToolCalls)) {
    chat.parallel_tool_calls = BoolParam(r.parameters, generate::kParallelToolCalls, false);
  }
  chat.reasoning_format = StringParam(r.parameters, generate::kReasoningFormat);
  return chat;
}

Result<llama_sampler*> MakeGrammar(const llama_vocab* vocab, const ChatPlan& plan) {
  std::vector<const char*> patterns;
  for (const auto& p : plan.trigger_patterns) patterns.push_back(p.c_str());
  llama_sampler* grammar = nullptr;
  try {
    grammar = plan.grammar_lazy
                  ? llama_sampler_init_grammar_lazy_patterns(
                        vocab, plan.grammar.c_str(), "root", patterns.data(), patterns.size(),
                        plan.trigger_tokens.data(), plan.trigger_tokens.size())
                  : llama_sampler_init_grammar(vocab, plan.grammar.c_str(), "root");
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("the answer's grammar does not build: ") + e.what());
  }
  if (!grammar) return InvalidArgument("the answer's grammar does not build (see the log)");
  return grammar;
}

// The grammar starts at the template's opening of the answer, which the prompt holds already:
// it is fed those tokens first (as llama.cpp's common sampler does).
Status Prefill(const llama_vocab* vocab, llama_sampler* grammar, const std::string& opening) {
  std::vector<llama_token> tokens(opening.size() + 8);
  const int n = llama_tokenize(vocab, opening.data(), static_cast<int32_t>(opening.size()),
                               tokens.data(), static_cast<int32_t>(tokens.size()), false, true);
  for (int i = 0; i < n; ++i) {
    const llama_token token = tokens[static_cast<size_t>(i)];
    const std::string piece = TokenPiece(vocab, token);
    if (i == 0 && !piece.empty() && std::isspace(static_cast<unsigned char>(piece[0])) &&
        !std::isspace(static_cast<unsigned char>(opening[0]))) {
      continue;  // a tokenizer's space before the first special token
    }
    try {
      llama_sampler_accept(grammar, token);
    } catch (const std::exception& e) {
      return InvalidArgument(std::string("the answer's grammar refuses the template's "
                                         "opening: ") + e.what());
    }
  }
  return Status::Ok();
}

}  // namespace mmserve
