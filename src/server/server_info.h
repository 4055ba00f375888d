// What every frontend says about the server (KServe server metadata).
#pragma once

#include <array>
#include <string_view>

namespace mmserve {

inline constexpr std::string_view kServerName = "mmserve";
inline constexpr std::string_view kServerVersion = "0.1.0";
// The protocol extensions advertised in server metadata (Triton's names where they exist).
inline constexpr std::array<std::string_view, 7> kServerExtensions = {
    "binary_tensor_data", "statistics", "model_repository", "model_configuration",
    "schedule_policy",    "parameters", "async_jobs"};

}  // namespace mmserve
