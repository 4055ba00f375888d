// Parses and validates a server YAML file in one pass. Validation is total: every problem in
// the file is collected (file:line:col, field path, expected, found) before anything loads.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "config/backend_catalog.h"
#include "config/model_config.h"

namespace mmserve {

// Reads `file`, parses it and validates it against `catalog`. A directory or a model file
// stands for the YAML ModelDirYaml writes for it (config/model_dir.h), `model_name` naming its
// one model.
Result<ServerConfig> LoadConfigFile(const std::filesystem::path& file,
                                    const BackendCatalog& catalog,
                                    const std::string& model_name = "");

// The models named on the command line (`serve --model [NAME=]PATH --task TASK`,
// config/model_dir.h), checked as the YAML they stand for. The config has no file: nothing
// to reload or watch.
Result<ServerConfig> LoadModelArgs(const std::vector<std::string>& models,
                                   const std::vector<std::string>& tasks,
                                   const BackendCatalog& catalog);

// Same, for YAML text already in memory; `file` names it in errors and anchors relative paths.
Result<ServerConfig> ParseConfig(const std::string& yaml, const std::string& file,
                                 const BackendCatalog& catalog);

// One model entry given as JSON (the shape of an item under `models:`), e.g. by a repository
// load request, read as if it were in `config`'s file: paths relative to its folder, its
// globals as defaults. One ModelConfig per served version; errors name fields "config.<key>".
Result<std::vector<ModelConfig>> ParseModelEntry(const nlohmann::json& entry,
                                                 const ServerConfig& config,
                                                 const BackendCatalog& catalog);

// Durations in the YAML: an integer number of seconds, or "250ms", "30s", "5m", "1h"; -1 is
// "forever" (nullopt). At most kMaxDurationMs (100 years): longer ones, and numbers that do not
// fit in 64 bits, are not durations (nullopt), so that no deadline arithmetic can overflow.
constexpr int64_t kMaxDurationMs = int64_t{100} * 365 * 24 * 3'600'000;
std::optional<std::optional<std::chrono::milliseconds>> ParseDuration(const std::string& text);

}  // namespace mmserve
