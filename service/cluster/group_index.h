// The atomic groups' index in etcd: one key per whole group of durable
// names,
//
//   <prefix>/groups/<group id> = {"names": [name, ...]}
//
// written in the group's own transaction, so the key's create revision is
// the group's revision (the cluster_group a reader asks by). It has no
// lease and no history is needed to read it: a group is found by its
// revision for as long as it stays whole, whatever etcd has compacted.
// Once a member is overwritten or deleted the key goes: the commit that
// broke the group removes it right after (RemoveGroupIndexKeys), and a
// periodic sweep (SweepBrokenGroups) removes any that a crash between the
// two left behind, so etcd holds one key per whole group and no more.
#ifndef TENSORD_SERVICE_CLUSTER_GROUP_INDEX_H_
#define TENSORD_SERVICE_CLUSTER_GROUP_INDEX_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/cluster/kv_store.h"

namespace tensord {

struct GroupMembers {
  std::string group;               // the group's id, as its records name it
  std::vector<std::string> names;  // in name order
};

std::string GroupIndexPrefix(absl::string_view prefix);
std::string GroupIndexKey(absl::string_view prefix, absl::string_view group);

// The key's value for a group of `names` (any order; stored in name order).
std::string EncodeGroupIndex(std::vector<std::string> names);

// Parses an index key as etcd returned it. DATA_LOSS, naming the key, for a
// key or value tensord does not write.
absl::StatusOr<GroupMembers> DecodeGroupIndex(absl::string_view prefix, const EtcdKeyValue& kv);

// The groups a transaction broke: the group of each name record it
// replaced or removed (`replaced`: the records as they were before it),
// unless the same transaction wrote that group (`written`). Records that
// do not parse are skipped: they name no group tensord can find.
std::vector<std::string> GroupsBrokenBy(absl::string_view prefix,
                                        std::span<const EtcdKeyValue> replaced,
                                        const absl::flat_hash_set<std::string>& written);

// Deletes the index keys of `groups`, at most `max_txn_ops` per etcd
// transaction. A key already gone is no error.
absl::Status RemoveGroupIndexKeys(KvStore& store, absl::string_view prefix,
                                  std::span<const std::string> groups, size_t max_txn_ops);

// After a transaction that replaced or removed `replaced`: removes the
// index keys of the groups it broke (GroupsBrokenBy): how many. When etcd
// refuses, logs cluster_group_index_not_removed and returns 0: the sweep
// removes them later.
size_t RemoveGroupsBrokenBy(KvStore& store, absl::string_view prefix,
                            std::span<const EtcdKeyValue> replaced,
                            const absl::flat_hash_set<std::string>& written, size_t max_txn_ops);

// Reads every index key and removes each whose group is no longer whole (a
// member's record is gone or holds another version): how many went. Reads
// the members' records `max_txn_ops` per transaction.
absl::StatusOr<size_t> SweepBrokenGroups(KvStore& store, absl::string_view prefix,
                                         size_t max_txn_ops);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_GROUP_INDEX_H_
