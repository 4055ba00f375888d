// Parses and validates a server YAML file in one pass. Validation is total: every problem in
// the file is collected (file:line:col, field path, expected, found) before anything loads.
#pragma once

#include <filesystem>
#include <string>

#include "common/result.h"
#include "config/backend_catalog.h"
#include "config/model_config.h"

namespace mmserve {

// Reads `file`, parses it and validates it against `catalog`.
Result<ServerConfig> LoadConfigFile(const std::filesystem::path& file,
                                    const BackendCatalog& catalog);

// Same, for YAML text already in memory; `file` names it in errors and anchors relative paths.
Result<ServerConfig> ParseConfig(const std::string& yaml, const std::string& file,
                                 const BackendCatalog& catalog);

// Durations in the YAML: an integer number of seconds, or "250ms", "30s", "5m", "1h"; -1 is
// "forever" (nullopt).
std::optional<std::optional<std::chrono::milliseconds>> ParseDuration(const std::string& text);

}  // namespace mmserve
