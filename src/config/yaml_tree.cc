#include "config/yaml_tree.h"

#include <yaml-cpp/yaml.h>

#include "common/json.h"
#include "common/strings.h"

namespace mmserve {
namespace {

using nlohmann::json;

SourceLocation ToLocation(const std::string& file, const YAML::Mark& mark) {
  if (mark.line < 0) return {.file = file};
  return {.file = file, .line = mark.line + 1, .column = mark.column + 1};
}

// A plain YAML number as YAML 1.2's core schema reads it: [-+]?digits, or a decimal fraction with
// an optional exponent. Scanned by hand (linear; std::regex recursed once per character).
bool IsYamlInteger(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsYamlFloat(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  size_t i = 0, digits = 0;
  const auto is_digit = [&] { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
  while (is_digit()) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (is_digit()) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!is_digit()) return false;
    while (is_digit()) ++i;
  }
  return i == s.size();
}

json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  if (text.empty() || text == "~" || text == "null") return nullptr;
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  if (IsYamlInteger(text)) {
    // Too large for an integer: keep the text; the typed reader reports it.
    if (auto n = ParseInt64(text)) return *n;
    return text;
  }
  if (IsYamlFloat(text)) {
    errno = 0;
    const double d = std::strtod(text.c_str(), nullptr);
    if (errno != ERANGE && std::isfinite(d)) return d;
  }
  return text;
}

// Converts the YAML tree to JSON with a location per field path. Strings must be text: a NUL or
// invalid UTF-8 is an error at its position (both would break every consumer of the name, path
// or message). yaml-cpp bounds the nesting (DeepRecursion), so the recursion here is bounded too.
class TreeBuilder {
 public:
  TreeBuilder(const std::string& file, Params::Locations& locations, ConfigErrors& errors)
      : file_(file), locations_(locations), errors_(errors) {}

  json Build(const YAML::Node& node, const std::string& path) {
    locations_[path] = ToLocation(file_, node.Mark());
    switch (node.Type()) {
      case YAML::NodeType::Map: {
        json out = json::object();
        for (const auto& kv : node) {
          const std::string key = kv.first.Scalar();
          CheckText(key, path.empty() ? "(key)" : path + ".(key)", kv.first.Mark());
          const std::string child = path.empty() ? key : path + "." + key;
          out[key] = Build(kv.second, child);
          locations_[Params::KeyPath(child)] = ToLocation(file_, kv.first.Mark());
          if (locations_[child].line == 0) locations_[child] = locations_[Params::KeyPath(child)];
        }
        return out;
      }
      case YAML::NodeType::Sequence: {
        json out = json::array();
        for (size_t i = 0; i < node.size(); ++i) {
          out.push_back(Build(node[i], path + "[" + std::to_string(i) + "]"));
        }
        return out;
      }
      case YAML::NodeType::Scalar:
        CheckText(node.Scalar(), path.empty() ? "(document)" : path, node.Mark());
        return ScalarToJson(node);
      default:
        return nullptr;
    }
  }

 private:
  void CheckText(const std::string& text, const std::string& field, const YAML::Mark& mark) {
    std::string problem;
    if (text.find('\0') != std::string::npos) {
      problem = "a NUL character";
    } else if (!IsValidUtf8(text)) {
      problem = "bytes that are not UTF-8";
    } else {
      return;
    }
    errors_.Add({.where = ToLocation(file_, mark),
                 .field = Abbreviate(ToValidUtf8(field), 80),
                 .expected = "UTF-8 text",
                 .found = problem});
  }

  const std::string& file_;
  Params::Locations& locations_;
  ConfigErrors& errors_;
};

}  // namespace

std::optional<json> ReadYamlTree(const std::string& yaml, const std::string& file,
                                 Params::Locations& locations, ConfigErrors& errors) {
  try {
    YAML::Node root = YAML::Load(yaml);
    if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    return TreeBuilder(file, locations, errors).Build(root, "");
  } catch (const YAML::Exception& e) {
    errors.Add({.where = ToLocation(file, e.mark),
                .field = "(document)",
                .expected = "valid YAML",
                .found = e.msg});
    return std::nullopt;
  }
}

}  // namespace mmserve
