#include "service/common/closest_name.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tensord {

size_t EditDistance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Wagner-Fischer plus adjacent swaps ("gte").
  const size_t columns = b.size() + 1;
  std::vector<size_t> table((a.size() + 1) * columns);
  const auto at = [&](size_t i, size_t j) -> size_t& { return table[i * columns + j]; };
  for (size_t i = 0; i <= a.size(); ++i) at(i, 0) = i;
  for (size_t j = 0; j <= b.size(); ++j) at(0, j) = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
      }
    }
  }
  return at(a.size(), b.size());
}

std::optional<std::string_view> ClosestName(std::string_view typed,
                                            std::span<const std::string_view> candidates) {
  // Scores in half steps: a slip of distance d scores 2d; an abbreviation
  // (a proper prefix) scores 3, after a one-character slip, before two.
  std::optional<std::string_view> best;
  size_t best_score = 0;
  for (std::string_view candidate : candidates) {
    if (typed.empty() || candidate == typed) continue;
    const size_t distance = EditDistance(typed, candidate);
    const size_t allowed = std::max<size_t>(1, std::max(typed.size(), candidate.size()) / 3);
    size_t score = distance <= allowed ? 2 * distance : SIZE_MAX;
    if (candidate.starts_with(typed)) score = std::min<size_t>(score, 3);
    if (score != SIZE_MAX && (!best || score < best_score)) {
      best = candidate;
      best_score = score;
    }
  }
  return best;
}

}  // namespace tensord
