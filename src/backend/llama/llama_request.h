// What a generate request asks for beyond its tokens, read from its inputs and parameters
// (backend/generate_contract.h): the chat request for the template layer, and the grammar
// sampler a plan asks for. Used by LlamaGenerator when it admits a request.
#pragma once

#include <llama.h>

#include <optional>
#include <string>

#include "backend/infer_request.h"
#include "backend/llama/llama_chat.h"

namespace mmserve {

// One text element of an optional input, or an error naming it.
Result<std::optional<std::string>> OneText(const InferRequest& r, const char* name);
// The request's chat inputs (MESSAGES, or ROLES and CONTENTS; TOOLS, TEMPLATE_KWARGS) and
// parameters as the template's request.
Result<ChatRequest> ChatRequestOf(const InferRequest& r);
// The plan's grammar as a sampler (lazy when the plan says so).
Result<llama_sampler*> MakeGrammar(const llama_vocab* vocab, const ChatPlan& plan);
// Feeds the template's opening of the answer (already in the prompt) to `grammar`.
Status Prefill(const llama_vocab* vocab, llama_sampler* grammar, const std::string& opening);

}  // namespace mmserve
