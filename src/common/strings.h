// Small string helpers shared by the config validator and the CLI.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mmserve {

size_t EditDistance(std::string_view a, std::string_view b);
// The candidate closest to `word` if it is close enough to be a likely typo, else "".
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);
std::string Join(const std::vector<std::string>& parts, std::string_view separator);
// Byte counts for people: "3686.4 MiB" (one decimal) and "4 MiB" (rounded to whole MiB).
std::string FormatMib(int64_t bytes);
std::string FormatWholeMib(int64_t bytes);
// Standard base64 (RFC 4648 §4, with padding).
std::string Base64Encode(std::string_view bytes);

}  // namespace mmserve
