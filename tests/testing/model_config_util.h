// Builds ModelConfigs for tests from a YAML `params:` snippet, through the real parser.
#pragma once

#include <string>

#include "config/model_config.h"

namespace mmserve::testing {

// An identity model named `name` whose params are the YAML flow map `params_yaml`
// (e.g. "{latency_ms: 5}"). Fails the test on a parse error.
ModelConfig IdentityModel(const std::string& name, const std::string& params_yaml = "{}");

}  // namespace mmserve::testing
