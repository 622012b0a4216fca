// What the gRPC service and the handoff server need of the cluster to
// answer for every name (read-through) and to delete everywhere, in plain
// types: service/cluster implements it on etcd, so the transport links no
// etcd code.
#ifndef TENSORD_SERVICE_COMMON_CLUSTER_READS_H_
#define TENSORD_SERVICE_COMMON_CLUSTER_READS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

class WatchSource;  // service/registry/watch_source.h

// A version some node holds, as the cluster directory lists it.
struct ClusterVersion {
  std::string name;
  std::string node;     // the node holding it
  std::string address;  // where that node serves
  uint64_t version = 0; // the number on that node
  int64_t origin = 0;   // cluster-wide order
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
};

// Counters since start, for metrics.
struct ClusterReadStats {
  uint64_t pulls = 0;             // versions copied here from another node
  uint64_t pulled_bytes = 0;
  uint64_t pull_failures = 0;     // pulls from one holder that failed
  uint64_t pulls_joined = 0;      // reads that waited on a pull already running
  uint64_t remote_deletes = 0;    // copies dropped for deletes on other nodes
  uint64_t registered_names = 0;  // names this node has in the directory
  uint64_t directory_names = 0;   // names the directory lists, every node's
};

// Thread-safe.
class ClusterReads {
 public:
  using Done = absl::AnyInvocable<void(absl::Status) &&>;
  virtual ~ClusterReads() = default;

  // Whether this node may answer a read of `name`'s latest version from
  // its own registry: no other node holds a newer version by the
  // directory. From memory, no etcd call: cheap enough for every read.
  virtual bool HoldsLatest(absl::string_view name) const = 0;

  // Makes this node hold the cluster's latest version of `name`, pulling it
  // from a live holder when another node has a newer one (or this node has
  // none). Concurrent calls for one name share one pull. `done` runs once,
  // on a cluster thread (or inline when nothing needs pulling): OK when the
  // registry now holds the latest, NOT_FOUND when no node holds `name`,
  // UNAVAILABLE naming the holders when none could be reached.
  virtual void PullLatest(std::string name, Done done) = 0;

  // Propagates a delete that this node has applied: every other node drops
  // its copy. `done` runs once the directory has recorded it.
  virtual void PropagateDelete(std::string name, Done done) = 0;

  // The copies a put of `name` asking for `requested` (0: the node's
  // default for the name) gets, checked before any byte moves:
  // FAILED_PRECONDITION naming the numbers when fewer nodes are live.
  virtual absl::StatusOr<uint32_t> ReplicasFor(absl::string_view name,
                                               uint32_t requested) const = 0;

  // After a put on this node published `version` of `name`: `done` runs
  // once the directory registered it and `replicas`-1 other live nodes hold
  // a registered copy. While etcd is unreachable a put with one copy is
  // acknowledged at once (registered when etcd is back); one with more
  // fails UNAVAILABLE (it stands on this node).
  virtual void AfterPut(std::string name, uint64_t version, uint32_t replicas, Done done) = 0;

  // Another node's Replicate call: pull `source` and keep it as a durable
  // registered replica; `done` once registered.
  virtual void Replicate(ClusterVersion source, Done done) = 0;

  // The latest version of every name starting with `prefix` and after
  // `after`, by the directory, in name order, at most `max_names`.
  virtual std::vector<ClusterVersion> ListNames(absl::string_view prefix, absl::string_view after,
                                                size_t max_names) const = 0;

  // What a cluster watch reads (every node's publishes and deletes, by etcd
  // revision), or null while the node is not in the directory.
  virtual WatchSource* ClusterWatchSource() const = 0;

  virtual ClusterReadStats stats() const = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_CLUSTER_READS_H_
