// What the gRPC service and the handoff server need of the cluster, in
// plain types (service/cluster implements it on etcd, so the transport
// links no etcd code). Every method answers without blocking: work that
// waits on etcd or on another node runs on cluster threads and calls back.
//
// The rule the transport follows everywhere: a read of a latest version
// calls EnsureLatest first and then serves from the registry; a write
// seals its version and hands it to Commit, which makes it the latest.
#ifndef TENSORD_SERVICE_REGISTRY_CLUSTER_ACCESS_H_
#define TENSORD_SERVICE_REGISTRY_CLUSTER_ACCESS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/registry/filling_version.h"
#include "service/registry/registry.h"
#include "service/registry/version_info.h"
#include "service/registry/watch_source.h"
#include "tensord/retention.h"

namespace tensord {

// A durable name's latest version as the cluster ordered it.
struct ClusterVersion {
  std::string name;
  std::string writer;  // the node that took the put
  int64_t origin = 0;  // its cluster-wide order (an etcd revision)
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
};

// Where a node holds a copy of a cache name (cache names have no record:
// the node the name hashes to keeps these, in memory).
struct CopyLocation {
  std::string name;
  std::string node;
  uint64_t version = 0;  // the number on that node
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
};

// What another node asks this one to copy: a durable version by its order.
struct ReplicaSource {
  std::string name;
  std::string node;  // a live member holding it
  int64_t origin = 0;
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
};

// What a streamed read of a latest version is served from: the version
// held here, or the copy of it that is arriving from another node.
struct LatestSource {
  Lease lease;                              // set, or else
  std::shared_ptr<FillingVersion> filling;  // this
};

// Counters since start, for metrics.
struct ClusterStats {
  uint64_t pulls = 0;  // versions copied here from another node
  uint64_t pulled_bytes = 0;
  uint64_t pull_failures = 0;         // pulls from one holder that failed
  uint64_t pulls_joined = 0;          // reads that waited on a pull already running
  uint64_t stale_copies_dropped = 0;  // copies dropped as overwritten or deleted elsewhere
  uint64_t record_reads = 0;          // names whose record a read asked etcd for
  uint64_t record_read_txns = 0;      // etcd transactions those took
  uint64_t record_writes = 0;         // records written (puts, deletes)
  uint64_t record_write_txns = 0;     // etcd transactions those took
  uint64_t cache_locations = 0;       // cache copies this node knows the place of
};

// Thread-safe.
class ClusterAccess {
 public:
  using Done = absl::AnyInvocable<void(absl::Status) &&>;
  using ReadDone = absl::AnyInvocable<void(std::vector<absl::StatusOr<Lease>>) &&>;
  using SourceDone = absl::AnyInvocable<void(absl::StatusOr<LatestSource>) &&>;
  using CommitDone = absl::AnyInvocable<void(absl::StatusOr<VersionInfo>) &&>;
  using GroupDone = absl::AnyInvocable<void(absl::StatusOr<std::vector<VersionInfo>>) &&>;
  using ListDone = absl::AnyInvocable<void(absl::StatusOr<std::vector<ClusterVersion>>) &&>;
  using WatchStartDone = absl::AnyInvocable<void(absl::StatusOr<WatchStart>) &&>;
  using GroupReadDone = absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>) &&>;
  // Whether the caller may read `name` (its status is the answer if not).
  using NameCheck = std::function<absl::Status(absl::string_view name)>;

  virtual ~ClusterAccess() = default;

  // A lease on the cluster's latest version of each name, copied here
  // first when another node holds it; serve exactly that version (it may be
  // replaced in the registry a moment later: the lease keeps it). One
  // answer per name, in order: the lease, NOT_FOUND (no node holds it), or
  // UNAVAILABLE naming why (etcd out of reach, or no live holder could give
  // the version the cluster ordered: an older one is never served
  // instead). Inline when nothing must be asked (a cache name held here),
  // else on a cluster thread.
  virtual void EnsureLatest(std::vector<std::string> names, ReadDone done) = 0;

  // EnsureLatest of one name for a reader that streams the bytes: a version
  // of more than kStreamedCopyBytes that must be copied here is answered as
  // soon as its copy starts, with the copy (readable as it arrives, its
  // last byte once the whole copy checked out); every other answer is
  // EnsureLatest's.
  virtual void EnsureLatestSource(std::string name, SourceDone done) = 0;
  static constexpr uint64_t kStreamedCopyBytes = FillingVersion::kPassedOnAboveBytes;

  // Leases on every item of the atomic group of durable names that the
  // cluster ordered at etcd revision `cluster_group`, in name order, each
  // copied here first when another node holds it: every item at that
  // group's version, or the whole call fails: NOT_FOUND when the revision
  // ordered no group (or etcd compacted it away) or an item has been
  // overwritten or deleted since, UNAVAILABLE when etcd or every holder of
  // an item is out of reach, RESOURCE_EXHAUSTED naming the limit when too
  // many group lookups are in flight. `may_read` (empty: every name) is
  // asked about each name before anything is copied: one refusal is the
  // answer. On a cluster thread.
  virtual void EnsureGroup(int64_t cluster_group, NameCheck may_read, GroupReadDone done) = 0;

  // The copies a put of `name` asking for `requested` (0: the node's
  // default for the name) gets, from memory, checked before any byte
  // moves: FAILED_PRECONDITION naming the numbers when fewer nodes are live.
  virtual absl::StatusOr<uint32_t> ReplicasFor(absl::string_view name, uint32_t requested,
                                               Retention retention) const = 0;

  // Makes `sealed` the latest version of its name: a durable one once etcd
  // ordered it (then installed here, and copied to replicas-1 other nodes
  // before `done`), a cache one here at once. UNAVAILABLE when etcd could
  // not be reached (nothing was published, or, if etcd's answer was lost,
  // the version may stand: the put's outcome is unknown).
  virtual void Commit(SealedVersion sealed, uint32_t replicas, CommitDone done) = 0;
  // An atomic group: one record per item and the group's, in one etcd
  // transaction, so every node sees all of the group or none of it; each
  // item gets `replicas` copies before `done`.
  virtual void CommitGroup(std::vector<SealedVersion> group, uint32_t replicas, GroupDone done) = 0;

  // Deletes `name` everywhere: OK once etcd ordered it (no node serves the
  // name afterwards), NOT_FOUND when neither the cluster nor this node had it.
  virtual void Delete(std::string name, Done done) = 0;

  // Another node's Replicate: copy `source` here as a durable holder.
  virtual void Replicate(ReplicaSource source, Done done) = 0;
  // Another node's announcement of cache copies it holds (names this node
  // is the home of), and the lookup of one.
  virtual void AnnounceCopies(std::vector<CopyLocation> copies) = 0;
  virtual absl::StatusOr<CopyLocation> LocateCopy(absl::string_view name) const = 0;

  // The durable names starting with `prefix` after `after`, in name
  // order, at most `max_names`, read from etcd.
  virtual void ListNames(std::string prefix, std::string after, size_t max_names,
                         ListDone done) = 0;

  // A cluster watch's start (WatchSource::StartWatch's contract, read from
  // etcd off the calling thread) and the feed it then reads: every durable
  // publish and delete, positioned by etcd revision. FAILED_PRECONDITION
  // while the node is not in the cluster.
  virtual void StartClusterWatch(std::string prefix, bool with_existing, uint64_t from_version,
                                 size_t max_existing, WatchStartDone done) = 0;
  virtual ChangeFeed* ClusterChanges() = 0;

  virtual ClusterStats stats() const = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_CLUSTER_ACCESS_H_
