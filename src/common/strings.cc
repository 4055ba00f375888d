#include "common/strings.h"

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <numeric>

namespace mmserve {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  // A likely typo: a few edits away, or a prefix of the intended name ("timeout" for
  // "timeout_ms") or the other way round.
  std::string best;
  size_t best_distance = SIZE_MAX;
  const size_t allowed = std::max<size_t>(2, word.size() / 3);
  for (const auto& c : candidates) {
    const size_t d = EditDistance(word, c);
    const std::string_view shorter = word.size() < c.size() ? word : std::string_view(c);
    const std::string_view longer = word.size() < c.size() ? std::string_view(c) : word;
    const bool prefix = shorter.size() >= 3 && longer.substr(0, shorter.size()) == shorter;
    if ((d <= allowed || prefix) && d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = static_cast<uint8_t>(bytes[i]) << 16 |
                       static_cast<uint8_t>(bytes[i + 1]) << 8 | static_cast<uint8_t>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string FormatMib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string FormatWholeMib(int64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

}  // namespace mmserve
