#include "common/strings.h"

#include <algorithm>
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

}  // namespace mmserve
