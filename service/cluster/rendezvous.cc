#include "service/cluster/rendezvous.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/crc32c.h"

namespace tensord {

std::vector<ClusterMember> RankMembers(absl::string_view name, std::vector<ClusterMember> members,
                                       absl::string_view skip, size_t count) {
  std::vector<std::pair<uint32_t, ClusterMember>> scored;
  scored.reserve(members.size());
  for (ClusterMember& member : members) {
    if (!skip.empty() && member.node_name == skip) continue;
    const std::string key = absl::StrCat(name, "#", member.node_name);
    scored.emplace_back(Crc32c(key.data(), key.size()), std::move(member));
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second.node_name < b.second.node_name;
  });
  std::vector<ClusterMember> ranked;
  for (size_t i = 0; i < scored.size() && ranked.size() < count; ++i) {
    ranked.push_back(std::move(scored[i].second));
  }
  return ranked;
}

}  // namespace tensord
