// The read path's one decision, in one place: may this node answer a read
// of a name's latest version from its own registry, and if not, which copy
// must it fetch first?
//
//   a cache name held here          -> serve it (no etcd: misses and older
//                                      copies are allowed for cache names)
//   otherwise read the name's record (linearizable: after the read began)
//     record, and our copy has its origin (or a newer one) -> serve ours
//     record, our copy older or none -> pull that origin from a live holder
//                                      it lists (never an older version)
//     no record                      -> drop an ordered copy we hold (the
//                                      name was deleted), then look for a
//                                      cache copy at the name's home node
#ifndef TENSORD_SERVICE_CLUSTER_LATEST_READS_H_
#define TENSORD_SERVICE_CLUSTER_LATEST_READS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "service/cluster/member_list.h"
#include "service/cluster/name_record.h"
#include "service/cluster/peer_channels.h"
#include "service/cluster/record_reader.h"
#include "service/cluster/work_pool.h"
#include "service/common/mutex.h"
#include "service/registry/cluster_access.h"
#include "service/registry/filling_version.h"
#include "service/registry/registry.h"

namespace tensord {

struct LatestReadsStats {
  uint64_t pulls = 0;
  uint64_t pulled_bytes = 0;
  uint64_t pull_failures = 0;
  uint64_t pulls_joined = 0;
  uint64_t stale_copies_dropped = 0;
};

// Thread-safe. Everything it is given must outlive it.
class LatestReads {
 public:
  // Where a cache name's copy is, asked of the name's home node (blocking,
  // on a pool thread): NOT_FOUND when no node announced one.
  using LocateCacheCopy = std::function<absl::StatusOr<CopyLocation>(const std::string& name)>;
  // After a pull of an ordered version: this node lists itself as one more
  // holder (blocking, on the pool thread, after the readers were answered),
  // so a reader elsewhere has one more node to be served from.
  using JoinHolders = std::function<absl::Status(const std::string& name, int64_t origin)>;

  LatestReads(std::string self, Registry& registry, RecordReader& records, MemberList& members,
              PeerChannels& peers, WorkPool& pool, LocateCacheCopy locate_cache_copy,
              JoinHolders join_holders);
  // Answers the pulls still waiting UNAVAILABLE.
  ~LatestReads();

  // ClusterAccess::EnsureLatest.
  void EnsureLatest(std::vector<std::string> names, ClusterAccess::ReadDone done);
  // ClusterAccess::EnsureLatestSource.
  void EnsureLatestSource(std::string name, ClusterAccess::SourceDone done);

  // How often a read whose version was replaced while it was pulled reads
  // the record again before it answers UNAVAILABLE.
  static constexpr int kAttempts = 4;

  // Drops this node's copy of `name` (version `version`, ordered at
  // `origin`) when a record says it is no longer the latest: overwritten
  // by `newer_origin`, or deleted at that revision. Keeps a copy that
  // changed meanwhile. Whether it went.
  bool DropStaleCopy(const std::string& name, int64_t newer_origin);

  LatestReadsStats stats() const;

 private:
  using NameDone = absl::AnyInvocable<void(absl::StatusOr<Lease>) &&>;
  using PullDone = absl::AnyInvocable<void(absl::Status) &&>;
  // A reader that streams: handed the copy as it starts (instead of `done`
  // once it ends) when a large version must be pulled.
  using FillingDone = absl::AnyInvocable<void(std::shared_ptr<FillingVersion>) &&>;
  // A cache copy nobody ordered, held here: served as it is (cache names
  // promise no order across nodes, so no etcd round trip).
  std::optional<Lease> UnorderedCacheCopy(const std::string& name);
  // With the record read: serve, pull, or look for a cache copy.
  void Decide(const std::string& name, RecordReader::Answer answer, int attempt, NameDone done,
              FillingDone filling = nullptr);
  // After a pull of `origin`: a lease on the copy, or the decision again
  // when a newer version (or a delete) replaced it meanwhile.
  void LeasePulled(const std::string& name, int64_t origin, int attempt, NameDone done);
  // Pulls `record`'s version here; concurrent callers for one version
  // share one pull, and its copy as it arrives (returned).
  std::shared_ptr<FillingVersion> PullOrdered(NameRecord record, PullDone done);
  // Tries each live holder in turn; ends `filling` either way.
  absl::Status PullFromHolders(const NameRecord& record, FillingVersion& filling);
  absl::Status PullFromSomeHolder(const NameRecord& record, FillingVersion& filling);
  void PullCacheCopy(const std::string& name, NameDone done);

  const std::string self_;
  Registry& registry_;
  RecordReader& records_;
  MemberList& members_;
  PeerChannels& peers_;
  WorkPool& pool_;
  const LocateCacheCopy locate_cache_copy_;
  const JoinHolders join_holders_;

  mutable Mutex mu_;
  // The pull of each (name, origin) in flight: the reads waiting for its
  // end (the first started it), and the copy as it arrives.
  struct Pull {
    std::vector<PullDone> waiting;
    std::shared_ptr<FillingVersion> filling;
  };
  absl::flat_hash_map<std::pair<std::string, int64_t>, Pull> pulling_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> pulls_{0};
  std::atomic<uint64_t> pulled_bytes_{0};
  std::atomic<uint64_t> pull_failures_{0};
  std::atomic<uint64_t> pulls_joined_{0};
  std::atomic<uint64_t> stale_dropped_{0};
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_LATEST_READS_H_
