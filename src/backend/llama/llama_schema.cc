// JSON schemas as grammars (llama_chat.h): bounded before llama.cpp's converter sees them. The
// converter and llama.cpp's grammar builder expand every repetition count into rules (a
// `maxLength: 100000` string is 100,000 nested rules) and parse `pattern`s by recursion, so the
// counts, patterns, sizes and depths that reach them are capped here, by an iterative walk.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/llama/llama_chat.h"
#include "json-schema-to-grammar.h"

namespace mmserve {
namespace {

using ojson = common_json;

constexpr size_t kMaxSchemaBytes = 64 << 10;
constexpr size_t kMaxGrammarBytes = 512 << 10;
constexpr int kMaxDepth = 32;          // schema objects inside each other
constexpr size_t kMaxNodes = 8192;     // schema objects in all
constexpr int64_t kMaxCount = 1000;    // minLength, maxItems, ... and {n,m} in patterns
constexpr size_t kMaxPatternChars = 512;
constexpr int kMaxPatternNesting = 16;
constexpr size_t kMaxEnumValues = 1000;
constexpr size_t kMaxProperties = 256;

const char* const kCountKeys[] = {"minLength", "maxLength", "minItems", "maxItems",
                                  "minProperties", "maxProperties", "minContains", "maxContains"};

// A repetition {n}, {n,} or {n,m} whose '{' is text[open], as a pattern and a grammar both
// write it: where its '}' is (npos: none), whether it is well formed (digits, at most one
// comma, something between the braces), has a count above kMaxCount, or a least above its most.
struct Repetition {
  size_t close = std::string::npos;
  bool well_formed = true;
  bool too_large = false;
  bool reversed = false;
};

Repetition ReadRepetition(const std::string& text, size_t open) {
  Repetition r;
  int commas = 0;
  int64_t n = 0, low = 0;
  bool high_given = false;
  size_t j = open + 1;
  for (; j < text.size() && text[j] != '}'; ++j) {
    const char d = text[j];
    if (d == ',' && ++commas == 1) {
      low = n;
      n = 0;
    } else if (d >= '0' && d <= '9') {
      high_given = commas == 1;
      n = std::min<int64_t>(n * 10 + (d - '0'), kMaxCount + 1);  // saturated: no overflow
      r.too_large = r.too_large || n > kMaxCount;
    } else {
      r.well_formed = false;
    }
  }
  if (j < text.size()) r.close = j;
  r.well_formed = r.well_formed && j > open + 1 && r.close != std::string::npos;
  r.reversed = high_given && n < low;
  return r;
}

// A pattern's nesting and its repetition counts, bounded.
Status CheckPattern(const std::string& pattern, const std::string& at) {
  if (pattern.size() > kMaxPatternChars) {
    return InvalidArgument(at + ": a pattern of " + std::to_string(pattern.size()) +
                           " characters; at most " + std::to_string(kMaxPatternChars));
  }
  int depth = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;
    } else if (c == '(') {
      if (++depth > kMaxPatternNesting) {
        return InvalidArgument(at + ": groups nested deeper than " +
                               std::to_string(kMaxPatternNesting));
      }
    } else if (c == ')') {
      --depth;
    } else if (c == '{') {
      // A quantifier is {n}, {n,} or {n,m}: anything else between braces is refused (the
      // converter reads "{df,2}" as a repetition without bound).
      const Repetition r = ReadRepetition(pattern, i);
      if (r.too_large) {
        return InvalidArgument(at + ": a repetition count above " + std::to_string(kMaxCount) +
                               " (the grammar would expand it into that many rules)");
      }
      if (!r.well_formed || r.reversed) {
        return InvalidArgument(at + ": a malformed repetition at character " +
                               std::to_string(i + 1) + " (expected {n}, {n,} or {n,m}, n <= m)");
      }
      i = r.close;
    }
    // A quantifier right after another repeats a repetition: refused (but `+?`, `*?`, `??`
    // ask for a lazy match, which the grammar ignores).
    const bool quantifier = c == '+' || c == '*' || c == '?' || c == '{';
    if (quantifier && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      const bool lazy = next == '?' && (i + 2 >= pattern.size() || !std::strchr("+*?{", pattern[i + 2]));
      if (!lazy && std::strchr("+*{", next) != nullptr) {
        return InvalidArgument(at + ": stacked quantifiers at character " + std::to_string(i + 2) +
                               " (a repetition of a repetition)");
      }
    }
  }
  return Status::Ok();
}

// One schema object's own keywords.
Status CheckNode(const ojson& node, const std::string& at) {
  for (const char* key : kCountKeys) {
    if (!node.contains(key)) continue;
    const ojson& v = node[key];
    if (!v.is_number_integer()) return InvalidArgument(at + "." + key + ": expected a whole number");
    // As a double: a count beyond int64 is simply over the bound.
    const double n = v.get<double>();
    if (n < 0) return InvalidArgument(at + "." + key + ": expected 0 or more");
    if (n > kMaxCount) {
      return InvalidArgument(at + "." + key + ": " + v.dump_safe() + " is above this "
                             "server's bound of " + std::to_string(kMaxCount) + " (the grammar "
                             "would expand it into that many rules); use a smaller bound or none");
    }
  }
  if (node.contains("pattern")) {
    if (!node["pattern"].is_string()) return InvalidArgument(at + ".pattern: expected a string");
    MMS_RETURN_IF_ERROR(CheckPattern(node["pattern"].get<std::string>(), at + ".pattern"));
  }
  if (node.contains("enum") && node["enum"].is_array() && node["enum"].size() > kMaxEnumValues) {
    return InvalidArgument(at + ".enum: more than " + std::to_string(kMaxEnumValues) + " values");
  }
  if (node.contains("properties") && node["properties"].is_object() &&
      node["properties"].size() > kMaxProperties) {
    return InvalidArgument(at + ".properties: more than " + std::to_string(kMaxProperties));
  }
  return Status::Ok();
}

// Whatever path made the grammar, llama.cpp's grammar parser expands each repetition into that
// many copies of what it repeats, and a quantifier right after another copies that expansion
// again ("x{9}++++": 2^n): no count above the bound, and no stacked quantifiers. GBNF text:
// literals ("...") and character classes ([...]) are skipped, escapes included.
Status CheckRepetitions(const std::string& grammar, const std::string& field) {
  auto refuse = [&](const std::string& why) {
    return InvalidArgument(field + ": its grammar would " + why);
  };
  bool after_quantifier = false;
  for (size_t i = 0; i < grammar.size(); ++i) {
    const char c = grammar[i];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      for (++i; i < grammar.size() && grammar[i] != close; ++i) {
        if (grammar[i] == '\\') ++i;
      }
      after_quantifier = false;
    } else if (c == '+' || c == '*' || c == '?' || c == '{') {
      if (after_quantifier) return refuse("repeat a repetition (stacked quantifiers)");
      if (c == '{') {
        const Repetition r = ReadRepetition(grammar, i);
        if (r.too_large) {
          return refuse("repeat a rule more than " + std::to_string(kMaxCount) + " times");
        }
        if (r.reversed) return refuse("repeat a rule at least more times than at most");
        i = std::min(r.close, grammar.size());
      }
      after_quantifier = true;
    } else if (c != ' ') {
      after_quantifier = false;
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckSchemaBounds(std::string_view text, const std::string& field) {
  if (text.size() > kMaxSchemaBytes) {
    return InvalidArgument(field + ": " + std::to_string(text.size()) + " bytes; at most " +
                           std::to_string(kMaxSchemaBytes));
  }
  const ojson schema = ojson::parse_no_throw(std::string(text));
  if (schema.is_discarded()) return InvalidArgument(field + ": not valid JSON");
  if (!schema.is_object() && !schema.is_boolean()) {
    return InvalidArgument(field + ": expected a schema object");
  }
  struct Item {
    const ojson* node;
    int depth;
    std::string at;
  };
  std::vector<Item> stack = {{&schema, 0, field}};
  size_t nodes = 0;
  while (!stack.empty()) {
    Item item = std::move(stack.back());
    stack.pop_back();
    if (++nodes > kMaxNodes) {
      return InvalidArgument(field + ": more than " + std::to_string(kMaxNodes) + " parts");
    }
    if (item.depth > kMaxDepth) {
      return InvalidArgument(item.at + ": nested deeper than " + std::to_string(kMaxDepth));
    }
    const ojson& node = *item.node;
    if (node.is_object()) MMS_RETURN_IF_ERROR(CheckNode(node, item.at));
    // Every value that may hold subschemas is walked: objects and arrays alike.
    if (node.is_object()) {
      for (const auto& entry : node.items()) {
        if (entry.value().is_object() || entry.value().is_array()) {
          stack.push_back({&entry.value(), item.depth + 1, item.at + "." + entry.key()});
        }
      }
    } else if (node.is_array()) {
      for (size_t i = 0; i < node.size(); ++i) {
        if (node[i].is_object() || node[i].is_array()) {
          stack.push_back({&node[i], item.depth + 1, item.at + "[" + std::to_string(i) + "]"});
        }
      }
    }
  }
  return Status::Ok();
}

Result<std::string> SchemaToGrammar(std::string_view text, const std::string& field) {
  SilenceChatLibraryLog();
  MMS_RETURN_IF_ERROR(CheckSchemaBounds(text, field));
  std::string grammar;
  try {
    grammar = json_schema_to_grammar(ojson::parse_no_throw(std::string(text)), /*force_gbnf=*/true);
  } catch (const std::exception& e) {
    std::string reason = e.what();
    if (reason.size() > 400) reason = reason.substr(0, 400) + "...";
    return InvalidArgument(field + ": the schema cannot be compiled to a grammar: " + reason);
  }
  MMS_RETURN_IF_ERROR(CheckRepetitions(grammar, field));
  if (grammar.size() > kMaxGrammarBytes) {
    return InvalidArgument(field + ": its grammar would have " + std::to_string(grammar.size()) +
                           " bytes; at most " + std::to_string(kMaxGrammarBytes));
  }
  return grammar;
}

}  // namespace mmserve
