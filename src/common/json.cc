#include "common/json.h"

namespace mmserve {

using nlohmann::json;

namespace {

// True when `text` opens more than `max_depth` arrays or objects at once. One pass over the
// bytes with the parser's own view of strings (a quote opens and closes one, a backslash
// escapes the next byte), so for every prefix the parser accepts it counts the depth the
// parser would build; past the first syntax error the answer does not matter.
bool NestsDeeperThan(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > max_depth) return true;
        break;
      case ']':
      case '}': --depth; break;
      default: break;
    }
  }
  return false;
}

}  // namespace

json ParseJson(std::string_view text, JsonError* error, int max_depth) {
  // The depth is checked before anything is built, in one linear pass. (nlohmann's callback
  // parser could check it as it goes, but it scans the parent object again at the end of
  // every nested object: quadratic in a wide object's members.) The parser itself keeps its
  // nesting on the heap and is linear.
  JsonError why = JsonError::kNone;
  json value;
  if (NestsDeeperThan(text, max_depth)) {
    why = JsonError::kTooDeep;
    value = json(json::value_t::discarded);
  } else {
    value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) why = JsonError::kSyntax;
  }
  if (error) *error = why;
  return value;
}

std::string DescribeJsonError(JsonError error, int max_depth) {
  switch (error) {
    case JsonError::kNone: return "is JSON";
    case JsonError::kSyntax: return "is not JSON";
    case JsonError::kTooDeep:
      return "is nested deeper than " + std::to_string(max_depth) + " levels";
  }
  return "is not JSON";
}

Result<json> ParseJsonObject(std::string_view text, const std::string& field) {
  JsonError error;
  json value = ParseJson(text, &error);
  if (error == JsonError::kTooDeep) return InvalidArgument(field + ": " + DescribeJsonError(error));
  if (value.is_discarded() || !value.is_object()) {
    return InvalidArgument(field + ": expected a JSON object");
  }
  return value;
}

std::string DumpJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string QuoteJson(const json& value, size_t max_chars) {
  std::string text;
  if (value.is_string() && value.get_ref<const std::string&>().size() > max_chars) {
    // Quote the start of a long string without rendering all of it.
    text = DumpJson(json(value.get_ref<const std::string&>().substr(0, max_chars)));
  } else {
    text = DumpJson(value);
  }
  if (text.size() > max_chars) text = text.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
  return text;
}

}  // namespace mmserve
