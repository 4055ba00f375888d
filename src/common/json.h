// JSON at the trust boundary: every byte a client, a config file or a model file sends is
// hostile. nlohmann's parser is iterative, but dump() recurses once per nesting level and
// throws on invalid UTF-8 unless told otherwise; these helpers make both safe:
//  - ParseJson refuses documents nested deeper than kMaxJsonDepth before building them;
//  - DumpJson never throws (invalid UTF-8 becomes U+FFFD);
//  - QuoteJson renders a bounded prefix of a value for error messages.
// Code under src/ parses and dumps JSON through these only (scripts/check_layers.sh checks).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace mmserve {

// Deeper than any request or configuration needs (KServe tensors nest one level per dimension;
// Triton caps dimensions at 8), and shallow enough for every recursive walk of a value.
constexpr int kMaxJsonDepth = 64;

enum class JsonError { kNone, kSyntax, kTooDeep };

// The parsed value, or a discarded value with `*error` saying why (kSyntax covers invalid
// UTF-8). Never throws.
nlohmann::json ParseJson(std::string_view text, JsonError* error = nullptr,
                         int max_depth = kMaxJsonDepth);
// "is not JSON" / "is nested deeper than 64 levels", for error messages.
std::string DescribeJsonError(JsonError error, int max_depth = kMaxJsonDepth);
// The JSON object `text` holds, or InvalidArgument naming `field` ("request body: is nested
// deeper than 64 levels", "request body: expected a JSON object").
Result<nlohmann::json> ParseJsonObject(std::string_view text, const std::string& field);

// Compact JSON text; invalid UTF-8 in strings is replaced, never thrown about.
std::string DumpJson(const nlohmann::json& value);
// DumpJson of `value`, cut to `max_chars` (with "...") for quoting in a message.
std::string QuoteJson(const nlohmann::json& value, size_t max_chars = 40);

}  // namespace mmserve
