// YAML text as a JSON tree the config readers walk, with a table of where each node was in the
// file (file:line:col for errors). yaml-cpp is confined here: scalars become JSON numbers,
// booleans or strings by YAML 1.2's core schema, read without regex or exceptions escaping.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config_error.h"
#include "config/params.h"

namespace mmserve {

// The tree of `yaml` (an empty document is an empty map), each node's location recorded in
// `locations` under its path ("models[0].name"); keys and strings that are not UTF-8 or hold a
// NUL are errors. nullopt, with the error added, when `yaml` is not YAML.
std::optional<nlohmann::json> ReadYamlTree(const std::string& yaml, const std::string& file,
                                           Params::Locations& locations, ConfigErrors& errors);

}  // namespace mmserve
