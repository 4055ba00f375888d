#include "config/params.h"

#include <algorithm>

#include "common/json.h"
#include "common/strings.h"

namespace mmserve {

std::string DescribeFound(const nlohmann::json& value) {
  if (value.is_object()) return "a map";
  if (value.is_array()) return "a list";
  if (value.is_null()) return "nothing";
  if (value.is_string()) return "\"" + Abbreviate(ToValidUtf8(value.get<std::string>())) + "\"";
  return QuoteJson(value);
}

SourceLocation Params::LocationOf(const std::string& field_path) const {
  for (std::string p = field_path;;) {
    if (auto it = locations_->find(p); it != locations_->end()) return it->second;
    const auto cut = p.find_last_of(".[");
    if (cut == std::string::npos) return {};
    p.resize(cut);
  }
}

SourceLocation Params::KeyLocationOf(const std::string& field_path) const {
  if (auto it = locations_->find(KeyPath(field_path)); it != locations_->end()) return it->second;
  return LocationOf(field_path);
}

ParamReader::ParamReader(const Params& params, ConfigErrors& errors)
    : params_(params), errors_(errors) {}

const nlohmann::json* ParamReader::Find(const std::string& key) {
  read_.insert(key);
  const auto& v = params_.value();
  if (!v.is_object()) return nullptr;
  auto it = v.find(key);
  return it == v.end() || it->is_null() ? nullptr : &*it;
}

bool ParamReader::Has(const std::string& key) const {
  return params_.value().is_object() && params_.value().contains(key);
}

void ParamReader::Error(const std::string& key, std::string expected, std::string found,
                        std::string hint) {
  errors_.Add({.where = params_.LocationOf(FieldPath(key)),
               .field = FieldPath(key),
               .expected = std::move(expected),
               .found = std::move(found),
               .hint = std::move(hint)});
}

int64_t ParamReader::Int(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  const auto* v = Find(key);
  if (!v) return fallback;
  const std::string expected =
      "an integer in " + std::to_string(min) + ".." + std::to_string(max);
  if (!v->is_number_integer() || v->get<int64_t>() < min || v->get<int64_t>() > max) {
    Error(key, expected, DescribeFound(*v));
    return fallback;
  }
  return v->get<int64_t>();
}

double ParamReader::Double(const std::string& key, double fallback, double min, double max) {
  const auto* v = Find(key);
  if (!v) return fallback;
  if (!v->is_number() || v->get<double>() < min || v->get<double>() > max) {
    Error(key, "a number in " + DumpJson(min) + ".." + DumpJson(max), DescribeFound(*v));
    return fallback;
  }
  return v->get<double>();
}

bool ParamReader::Bool(const std::string& key, bool fallback) {
  const auto* v = Find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) {
    Error(key, "true or false", DescribeFound(*v));
    return fallback;
  }
  return v->get<bool>();
}

std::string ParamReader::String(const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& allowed) {
  const auto* v = Find(key);
  if (!v) return fallback;
  if (!v->is_string()) {
    Error(key, "a string", DescribeFound(*v));
    return fallback;
  }
  auto s = v->get<std::string>();
  if (s.find('\0') != std::string::npos || !IsValidUtf8(s)) {
    Error(key, "UTF-8 text without NUL characters", DescribeFound(*v));
    return fallback;
  }
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    Error(key, "one of " + Join(allowed, ", "), DescribeFound(*v));
    return fallback;
  }
  return s;
}

std::vector<int64_t> ParamReader::IntList(const std::string& key, int64_t min, int64_t max) {
  const auto* v = Find(key);
  std::vector<int64_t> out;
  if (!v) return out;
  const std::string expected =
      "a list of integers in " + std::to_string(min) + ".." + std::to_string(max);
  if (!v->is_array()) {
    Error(key, expected, DescribeFound(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    if (!e.is_number_integer() || e.get<int64_t>() < min || e.get<int64_t>() > max) {
      Error(key + "[" + std::to_string(i) + "]", expected, DescribeFound(e));
      continue;
    }
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<double> ParamReader::DoubleList(const std::string& key, double min, double max) {
  const auto* v = Find(key);
  std::vector<double> out;
  if (!v) return out;
  const std::string expected = "a list of numbers in " + DumpJson(min) + ".." + DumpJson(max);
  if (!v->is_array()) {
    Error(key, expected, DescribeFound(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    if (!e.is_number() || !(e.get<double>() >= min && e.get<double>() <= max)) {
      Error(key + "[" + std::to_string(i) + "]", expected, DescribeFound(e));
      continue;
    }
    out.push_back(e.get<double>());
  }
  return out;
}

std::vector<std::string> ParamReader::StringList(const std::string& key,
                                                const std::string& expected,
                                                const std::string& item) {
  const auto* v = Find(key);
  std::vector<std::string> out;
  if (!v) return out;
  if (!v->is_array()) {
    Error(key, expected, DescribeFound(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    if (!e.is_string() || e.get_ref<const std::string&>().empty()) {
      Error(key + "[" + std::to_string(i) + "]", item, DescribeFound(e));
      continue;
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<Params> ParamReader::MapList(const std::string& key) {
  const auto* v = Find(key);
  std::vector<Params> out;
  if (!v) return out;
  if (!v->is_array()) {
    Error(key, "a list of maps", DescribeFound(*v));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string element = key + "[" + std::to_string(i) + "]";
    if (!(*v)[i].is_object()) {
      Error(element, "a map", DescribeFound((*v)[i]));
      continue;
    }
    out.push_back(params_.Sub((*v)[i], FieldPath(element)));
  }
  return out;
}

std::optional<Params> ParamReader::Map(const std::string& key) {
  const auto* v = Find(key);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    Error(key, "a map", DescribeFound(*v));
    return std::nullopt;
  }
  return params_.Sub(*v, FieldPath(key));
}

void ParamReader::Finish() {
  const auto& v = params_.value();
  if (!v.is_object()) return;
  std::vector<std::string> known(read_.begin(), read_.end());
  for (const auto& [key, value] : v.items()) {
    if (read_.count(key)) continue;
    // A key far longer than any known one is no typo (and EditDistance is quadratic).
    const auto closest = key.size() > 64 ? std::string() : ClosestMatch(key, known);
    const std::string shown = Abbreviate(ToValidUtf8(key));
    errors_.Add({.where = params_.KeyLocationOf(FieldPath(key)),
                 .field = FieldPath(shown),
                 .expected = known.empty() ? "no parameters" : "one of " + Join(known, ", "),
                 .found = "unknown key \"" + shown + "\"",
                 .hint = closest.empty() ? "" : "did you mean '" + closest + "'?"});
  }
}

}  // namespace mmserve
