// "Did you mean ...?" for command lines: the known name nearest to a typo.
#ifndef TENSORD_SERVICE_COMMON_CLOSEST_NAME_H_
#define TENSORD_SERVICE_COMMON_CLOSEST_NAME_H_

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace tensord {

// Edit distance: insertions, deletions, substitutions and swaps of two
// adjacent characters, each 1.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate with the smallest edit distance to `typed`, when that
// distance is small enough to be a slip (at most a third of the longer
// name, and at least 1 allowed); the first such candidate on a tie. A
// candidate that starts with `typed` (an abbreviation) also counts, after
// one-character slips. `typed` itself is never suggested.
std::optional<std::string_view> ClosestName(std::string_view typed,
                                            std::span<const std::string_view> candidates);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_CLOSEST_NAME_H_
