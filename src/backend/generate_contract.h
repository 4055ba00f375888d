// The generate task's contract: the names of what a generate model takes and answers, written
// once for the frontends that build its requests (server/http's OpenAI routes) and the engine
// that reads them (backend/llama). backend/llama/llama_generator.h says what each one means.
#pragma once

namespace mmserve::generate {

// Inputs (BYTES).
inline constexpr char kPrompt[] = "PROMPT";                  // [1] the prompt as it is
inline constexpr char kRoles[] = "ROLES";                    // [n] with kContents: a chat
inline constexpr char kContents[] = "CONTENTS";              // [n]
inline constexpr char kMessages[] = "MESSAGES";              // [1] OpenAI's messages, JSON
inline constexpr char kTools[] = "TOOLS";                    // [1] OpenAI's tools, JSON
inline constexpr char kTemplateKwargs[] = "TEMPLATE_KWARGS"; // [1] a JSON object
inline constexpr char kJsonSchema[] = "JSON_SCHEMA";         // [1] the answer's schema, JSON
inline constexpr char kStop[] = "STOP";                      // [n] more stop strings

// Outputs (BYTES).
inline constexpr char kText[] = "TEXT";        // [1] the generated text (a partial: the new text)
inline constexpr char kMessage[] = "MESSAGE";  // [1] a chat's answer as a message, JSON
inline constexpr char kDelta[] = "DELTA";      // [n] a chat partial's message deltas, JSON each

// Request parameters beyond sampling.
inline constexpr char kToolChoice[] = "tool_choice";  // auto | none | required
inline constexpr char kToolName[] = "tool_name";      // the named form of tool_choice
inline constexpr char kParallelToolCalls[] = "parallel_tool_calls";
inline constexpr char kReasoningFormat[] = "reasoning_format";
inline constexpr char kRenderOnly[] = "render_only";  // answer the rendered prompt as kText
inline constexpr char kCachePrompt[] = "cache_prompt";  // false: no reuse of cached prompts
inline constexpr char kCacheSalt[] = "cache_salt";      // only requests with the same salt share

// Response parameters (the llama encoders set kPromptTokens too).
inline constexpr char kPromptTokens[] = "prompt_tokens";
inline constexpr char kCompletionTokens[] = "completion_tokens";
inline constexpr char kFinishReason[] = "finish_reason";  // stop | length | tool_calls
inline constexpr char kCachedTokens[] = "cached_tokens";  // prompt tokens reused from a cache

}  // namespace mmserve::generate
