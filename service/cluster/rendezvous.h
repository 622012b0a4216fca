// Rendezvous (highest random weight) hashing over the live members: every
// node ranks the members for a name the same way, without talking, and a
// member leaving moves only the names it ranked first. Used to choose a
// durable put's replica targets and a cache name's home node.
#ifndef TENSORD_SERVICE_CLUSTER_RENDEZVOUS_H_
#define TENSORD_SERVICE_CLUSTER_RENDEZVOUS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/common/cluster_view.h"

namespace tensord {

// `members` ranked for `name`, best first, without `skip` (empty: none);
// at most `count`. Stable across processes: CRC-32C of "name#node".
std::vector<ClusterMember> RankMembers(absl::string_view name, std::vector<ClusterMember> members,
                                       absl::string_view skip, size_t count);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_RENDEZVOUS_H_
