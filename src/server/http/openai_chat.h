// The chat fields of /v1/chat/completions and /apply-template (openai_chat.cc), and the answer's
// message read back from a generator's MESSAGE and DELTA outputs. Internal to server/http.
#pragma once

#include <vector>

#include "server/http/openai_common.h"

namespace mmserve::openai {

// messages (with tool calls and tool results), tools, tool_choice, parallel_tool_calls,
// chat_template_kwargs, reasoning_format and response_format, checked (errors name the field)
// and added to `r` as the generator's inputs and parameters.
Status ReadChat(const json& body, InferRequest& r);
// response_format alone (/v1/completions takes it too): JSON_SCHEMA when it asks for JSON.
Status ReadResponseFormat(const json& body, InferRequest& r);

// The answer as OpenAI's assistant message: content (null when it only calls tools),
// reasoning_content, tool_calls.
json AssistantMessage(const InferResponse& response);
// A streamed partial's message deltas (DELTA), as OpenAI's `delta` objects.
std::vector<json> Deltas(const InferResponse& partial);

}  // namespace mmserve::openai
