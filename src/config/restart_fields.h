// Which global settings a reload can change while serving and which take a restart. Every
// GlobalConfig field is classified in restart_fields.cc; a field added to the struct without a
// class there fails to compile (a structured binding names them all).
#pragma once

#include <string>
#include <vector>

#include "config/model_config.h"

namespace mmserve {

// The YAML names (global.<name>) of the settings that differ between `was` and `now` and take
// effect only after a restart; a reload keeps the old values of those.
std::vector<std::string> RestartNeeded(const GlobalConfig& was, const GlobalConfig& now);

}  // namespace mmserve
