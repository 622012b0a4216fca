#include "service/cluster/rendezvous.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "service/common/crc32c.h"

namespace tensord {

uint32_t RendezvousWeight(absl::string_view name, absl::string_view node) {
  uint32_t crc = Crc32cExtend(0, name.data(), name.size());
  crc = Crc32cExtend(crc, "#", 1);
  return Crc32cExtend(crc, node.data(), node.size());
}

std::vector<ClusterMember> RankMembers(absl::string_view name, std::vector<ClusterMember> members,
                                       absl::string_view skip, size_t count) {
  std::vector<std::pair<uint32_t, ClusterMember>> scored;
  scored.reserve(members.size());
  for (ClusterMember& member : members) {
    if (!skip.empty() && member.node_name == skip) continue;
    const uint32_t weight = RendezvousWeight(name, member.node_name);
    scored.emplace_back(weight, std::move(member));
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return RanksBefore(a.first, a.second.node_name, b.first, b.second.node_name);
  });
  std::vector<ClusterMember> ranked;
  for (size_t i = 0; i < scored.size() && ranked.size() < count; ++i) {
    ranked.push_back(std::move(scored[i].second));
  }
  return ranked;
}

}  // namespace tensord
