// Rendezvous (highest random weight) hashing over the live members: every
// node ranks the members for a name the same way, without talking, and a
// member leaving moves only the names it ranked first. Used to choose a
// durable put's replica targets and a cache name's home node.
#ifndef TENSORD_SERVICE_CLUSTER_RENDEZVOUS_H_
#define TENSORD_SERVICE_CLUSTER_RENDEZVOUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/common/cluster_view.h"

namespace tensord {

// The weight of `node` for `name`: CRC-32C of "name#node", stable across
// processes.
uint32_t RendezvousWeight(absl::string_view name, absl::string_view node);
// Whether `a` (of weight `weight_a`) ranks before `b`: the higher weight,
// then the smaller node name.
inline bool RanksBefore(uint32_t weight_a, absl::string_view a, uint32_t weight_b,
                        absl::string_view b) {
  return weight_a != weight_b ? weight_a > weight_b : a < b;
}

// `members` ranked for `name`, best first, without `skip` (empty: none);
// at most `count`. Stable across processes: CRC-32C of "name#node".
std::vector<ClusterMember> RankMembers(absl::string_view name, std::vector<ClusterMember> members,
                                       absl::string_view skip, size_t count);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_RENDEZVOUS_H_
