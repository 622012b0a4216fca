// Finds an atomic group of durable names by the etcd revision that ordered
// it: in the group index (group_index.h: the key created at that revision,
// there for as long as the group is whole, whatever etcd compacted), or,
// for a revision the index does not know, in etcd's history while etcd
// keeps it. The group's records were written in one transaction of their
// own (record_committer), so the changes to the name records at that
// revision are exactly the group: a watch from that revision gives them
// without scanning the names, and tells a group that broke since (its
// index key gone) from a revision that ordered none.
#ifndef TENSORD_SERVICE_CLUSTER_GROUP_LOOKUP_H_
#define TENSORD_SERVICE_CLUSTER_GROUP_LOOKUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/cluster/group_index.h"
#include "service/cluster/kv_store.h"
#include "service/registry/tensor_version.h"

namespace tensord {

// The members of the group ordered at `revision` under the cluster
// `prefix`. Blocks for at most about `patience` (a history read). NOT_FOUND
// when that revision wrote no group's records (or is newer than etcd's),
// or when the index does not know it and etcd has compacted its history
// past it (a group that broke since, or none); UNAVAILABLE when etcd
// cannot be reached.
absl::StatusOr<GroupMembers> FindGroupAt(KvStore& store, absl::string_view prefix, int64_t revision,
                                         absl::Duration patience);

// The group's items as one answer: `leases` (one per member, in the
// members' order, from the cluster's read of each name's latest) must all
// be at the group's own version (origin `revision`). NOT_FOUND naming the
// first item that has been overwritten or deleted since; an item's own
// failure (UNAVAILABLE: no live holder) is the answer otherwise.
absl::StatusOr<std::vector<Lease>> WholeGroup(int64_t revision, const GroupMembers& members,
                                              std::vector<absl::StatusOr<Lease>> leases);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_GROUP_LOOKUP_H_
