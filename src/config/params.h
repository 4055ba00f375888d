// Params: the backend-specific `params:` map of one model, kept as a typed value tree with the
// YAML position of every node, so that a backend can validate its own options and still report
// errors with file:line:col. ParamReader reads it with types and ranges, collecting errors.
//
// Params is immutable after parsing and safe to read from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_error.h"

namespace mmserve {

class Params {
 public:
  Params() : value_(nlohmann::json::object()), locations_(std::make_shared<Locations>()) {}

  // `value` is the tree; `path` the field path of its root ("models[1].params").
  using Locations = std::map<std::string, SourceLocation>;  // field path → position
  Params(nlohmann::json value, std::string path, std::shared_ptr<const Locations> locations)
      : value_(std::move(value)), path_(std::move(path)), locations_(std::move(locations)) {}

  const nlohmann::json& value() const { return value_; }
  const std::string& path() const { return path_; }
  // Where the value of `field_path` is (or its nearest located ancestor).
  SourceLocation LocationOf(const std::string& field_path) const;
  // Where the key of `field_path` is, for "unknown key" errors; else LocationOf().
  SourceLocation KeyLocationOf(const std::string& field_path) const;
  static std::string KeyPath(const std::string& field_path) { return "key:" + field_path; }
  // A sub-tree of this one (a list element, a nested map) sharing its location table.
  Params Sub(nlohmann::json value, std::string path) const {
    return Params(std::move(value), std::move(path), locations_);
  }
  bool empty() const { return value_.empty(); }

 private:
  nlohmann::json value_;
  std::string path_;
  std::shared_ptr<const Locations> locations_;
};

// Reads a map-valued Params with defaults, types and ranges. Each problem becomes a ConfigError
// in `errors` and the default is returned, so a reader can keep going and report everything.
// Finish() reports the keys nobody read as unknown, with a "did you mean".
class ParamReader {
 public:
  ParamReader(const Params& params, ConfigErrors& errors);

  int64_t Int(const std::string& key, int64_t fallback, int64_t min, int64_t max);
  double Double(const std::string& key, double fallback, double min, double max);
  bool Bool(const std::string& key, bool fallback);
  std::string String(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& allowed = {});
  std::vector<int64_t> IntList(const std::string& key, int64_t min, int64_t max);
  std::vector<double> DoubleList(const std::string& key, double min, double max);
  // A list of non-empty strings: `expected` describes the list, `item` one element.
  std::vector<std::string> StringList(const std::string& key, const std::string& expected,
                                      const std::string& item);
  // A list of maps; each element is returned as its own Params (read it with a ParamReader).
  std::vector<Params> MapList(const std::string& key);
  // A nested map; nullopt (with an error if present but not a map) otherwise.
  std::optional<Params> Map(const std::string& key);
  // The raw value for fields with a union type (e.g. "high" or 1); marks the key as read.
  const nlohmann::json* Raw(const std::string& key) { return Find(key); }
  bool Has(const std::string& key) const;
  std::string FieldPath(const std::string& key) const {
    return params_.path().empty() ? key : params_.path() + "." + key;
  }
  void Error(const std::string& key, std::string expected, std::string found,
             std::string hint = {});
  void Finish();
  // Where this reader collects errors (for readers of nested maps).
  ConfigErrors& errors() { return errors_; }

 private:
  const nlohmann::json* Find(const std::string& key);

  const Params& params_;
  ConfigErrors& errors_;
  std::set<std::string> read_;
};

// How a JSON value reads in an error message: "\"fast\"", "a list", "a map", "3.5".
std::string DescribeFound(const nlohmann::json& value);

}  // namespace mmserve
