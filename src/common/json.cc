#include "common/json.h"

namespace mmserve {

using nlohmann::json;

json ParseJson(std::string_view text, JsonError* error, int max_depth) {
  bool too_deep = false;
  // The callback sees every event with its depth; past the limit it discards (so nothing deep
  // is built) and remembers why. The parser itself keeps its nesting on the heap.
  const json::parser_callback_t guard = [&](int depth, json::parse_event_t event, json&) {
    if (depth >= max_depth && (event == json::parse_event_t::object_start ||
                              event == json::parse_event_t::array_start)) {
      too_deep = true;
    }
    return !too_deep;
  };
  json value = json::parse(text.begin(), text.end(), guard, /*allow_exceptions=*/false);
  JsonError why = JsonError::kNone;
  if (too_deep) {
    why = JsonError::kTooDeep;
    value = json(json::value_t::discarded);
  } else if (value.is_discarded()) {
    why = JsonError::kSyntax;
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
