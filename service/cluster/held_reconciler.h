// Brings what a node holds in line with the cluster's records, when it
// joins (what a snapshot restored, what was preloaded) and when its watch
// of the records missed changes (etcd compacted them):
//
//   an ordered copy whose record moved on or went  -> dropped
//   an ordered durable copy the record still names -> listed as a holder
//   a durable version no record orders (held before the node was in a
//   cluster: a preload, a single-node snapshot)     -> ordered now if the
//                          name has no record; a holder if the record names
//                          the same bytes; dropped if it names others
//
// So a node that was away never brings back an overwritten or deleted
// version: the record decides, not the node.
#ifndef TENSORD_SERVICE_CLUSTER_HELD_RECONCILER_H_
#define TENSORD_SERVICE_CLUSTER_HELD_RECONCILER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/cluster/cluster_writes.h"
#include "service/cluster/kv_store.h"
#include "service/cluster/latest_reads.h"
#include "service/cluster/record_reader.h"
#include "service/registry/registry.h"

namespace tensord {

struct ReconcileCounts {
  uint64_t checked = 0;  // versions looked at
  uint64_t dropped = 0;  // stale, gone
  uint64_t ordered = 0;  // unordered versions given a record
  uint64_t joined = 0;   // holders added to records
};

// Blocks (etcd reads and writes in batches). Everything given must outlive it.
absl::StatusOr<ReconcileCounts> ReconcileHeld(Registry& registry, KvStore& store,
                                              RecordReader& records, ClusterWrites& writes,
                                              LatestReads& latest, const std::string& prefix,
                                              const std::string& self, size_t max_txn_ops);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_HELD_RECONCILER_H_
