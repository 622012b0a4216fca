// The cluster's directory: which nodes hold each name's latest version,
// kept in etcd (directory_record.h) and mirrored in memory on every node.
//
// Two threads. The registrar follows this node's registry (its change feed)
// and writes holder keys for what it publishes and deletes them for what
// it drops, batched into etcd transactions and bound to the node's lease,
// so a dead node's entries vanish with it; when the lease changes (etcd lost
// it) or the feed was missed, it registers everything held again. The
// mirror reads the directory once and then follows etcd's watch of it, so
// lookups on the read path cost no etcd call; it applies deletes made on
// other nodes (tombstones) to this node's registry.
//
// Ordering: a version's origin is the etcd revision of its original
// registration, so every node agrees which version of a name is latest.
#ifndef TENSORD_SERVICE_CLUSTER_CLUSTER_DIRECTORY_H_
#define TENSORD_SERVICE_CLUSTER_CLUSTER_DIRECTORY_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "service/cluster/directory_record.h"
#include "service/cluster/etcd_client.h"
#include "service/common/episode_log.h"
#include "service/common/mutex.h"
#include "service/registry/registry.h"
#include "service/registry/watch_source.h"

namespace tensord {

struct DirectoryOptions {
  std::string prefix = "/tensord";
  std::string node_name;
  std::string advertise_address;
  // Ops per etcd transaction (etcd's --max-txn-ops defaults to 128).
  size_t max_ops_per_txn = 128;
  // How long a delete's tombstone stays in etcd: a node cut off from etcd
  // for longer may register a deleted name again when it returns.
  absl::Duration tombstone_ttl = absl::Minutes(2);
};

// Where a name's latest version is, by the directory.
struct NameLocation {
  // The cluster order of the latest version known; 0 when no node holds it.
  int64_t origin = 0;
  // The nodes other than this one holding that version (originals first).
  std::vector<HolderRecord> holders;
};

struct DirectoryStats {
  uint64_t names = 0;          // names the mirror knows a holder of
  uint64_t registered = 0;     // names this node has registered
  uint64_t remote_deletes = 0; // local copies dropped for deletes elsewhere
};

// Thread-safe. Lifecycle: construct, Start() once the node has joined,
// Stop() (or destroy) before the registry goes. As a WatchSource it feeds
// cluster watches: every node's original publishes and deletes, positioned
// by etcd revision, as the mirror receives them.
class ClusterDirectory final : public WatchSource {
 public:
  // The node's current etcd lease (0: none at the moment).
  using LeaseSource = std::function<int64_t()>;

  ClusterDirectory(std::shared_ptr<EtcdClient> etcd, Registry& registry, DirectoryOptions options,
                   LeaseSource lease);
  ~ClusterDirectory();
  ClusterDirectory(const ClusterDirectory&) = delete;
  ClusterDirectory& operator=(const ClusterDirectory&) = delete;

  void Start();
  void Stop();

  // HoldsLatest of cluster_reads.h, from the mirror.
  bool HoldsLatest(absl::string_view name) const;

  // The cluster order of this node's `version` of `name`: what it was
  // registered with, or INT64_MAX for a local publish not registered yet
  // (newer than anything registered before it).
  int64_t OriginOf(absl::string_view name, uint64_t version) const;

  // `node`'s holder record of `name`, from the mirror or else from etcd;
  // NOT_FOUND when the directory lists none.
  absl::StatusOr<HolderRecord> HolderOf(absl::string_view name, absl::string_view node);

  // The latest version's holders other than this node. From the mirror;
  // when it knows no holder (it may lag a publish elsewhere by a watch
  // delivery), read from etcd now, so a name put on one node is found on
  // another as soon as the put was acknowledged.
  absl::StatusOr<NameLocation> Locate(absl::string_view name);

  // Publishes a copy pulled from `source` (pending.only_if_latest set by the
  // caller) and registers it with `source`'s origin.
  absl::StatusOr<VersionInfo> PublishReplica(PendingVersion pending, uint32_t crc32c,
                                             const HolderRecord& source);

  // Records a delete this node applied, for every node: removes every
  // holder key of `name` and writes its tombstone, in one transaction.
  absl::Status PropagateDelete(absl::string_view name);

  // Runs `done` once this node's changes up to feed position `position`
  // (a publish's version) are registered in etcd: OK; UNAVAILABLE at once
  // while registration is failing (etcd out of reach), and
  // DEADLINE_EXCEEDED after `timeout`. On the registrar's thread, or inline.
  using Done = absl::AnyInvocable<void(absl::Status) &&>;
  void AfterRegistered(uint64_t position, absl::Duration timeout, Done done);

  // The name's latest holder record per name starting with `name_prefix`
  // and sorting after `after`, this node's included, in name order.
  std::vector<HolderRecord> ListNames(absl::string_view name_prefix, absl::string_view after,
                                      size_t max_names) const;

  DirectoryStats stats() const;
  const DirectoryOptions& options() const { return options_; }

  // WatchSource: existing = each name's latest holder record.
  absl::StatusOr<WatchStart> StartWatch(absl::string_view prefix, bool with_existing,
                                        uint64_t from_version, size_t max_existing) const override;
  ChangeFeed& changes() override { return cluster_changes_; }

 private:
  struct NameEntry {
    std::map<std::string, HolderRecord> holders;  // by node
  };
  // What this node registered for a name.
  struct LocalEntry {
    uint64_t version = 0;
    int64_t origin = 0;
    bool replica = false;  // copied from another holder
  };

  // Mirror thread.
  void MirrorLoop();
  // Reads the directory (when `read_again`, or never yet) and watches it
  // from there, or else resumes the watch after the last revision seen.
  absl::Status MirrorOnce(bool read_again);
  // Replaces the mirror with a read of the directory; the revision to watch from.
  absl::StatusOr<int64_t> ReadDirectory();
  absl::Status WatchDirectory(int64_t from_revision);
  void ApplyMirrorEvent(const EtcdWatchEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends the cluster changes in `events` (one or more revisions, in
  // order) to cluster_changes_.
  void AppendClusterChanges(const std::vector<EtcdWatchEvent>& events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops this node's copy of `name` when a tombstone at `revision` is
  // newer than it; called without mu_.
  void ApplyTombstone(const std::string& name, int64_t revision);
  // Drops this node's replica of `name` once another node registered a
  // newer version (`origin`): a stale copy would only hold memory. Without mu_.
  void DropSupersededReplica(const std::string& name, int64_t origin);
  // Registrar thread.
  void RegistrarLoop();
  // Registers every name the registry holds (and unregisters what it no
  // longer does); `position` becomes the feed position it is current as of.
  // `at_start`: the first registration of this process, which judges what
  // it holds against the directory (see RegisterAll).
  absl::Status RegisterAll(int64_t lease, uint64_t& position, bool at_start);
  absl::Status RegisterChanges(int64_t lease, uint64_t& position, bool& missed);
  // One batch of holder puts and deletes; the puts' origins come back.
  // `oldest`: names registered with origin 1 (older than any publish).
  absl::Status WriteOps(int64_t lease, const std::vector<VersionInfo>& publish,
                        const std::vector<std::string>& unregister,
                        const absl::flat_hash_set<std::string>* oldest = nullptr);
  // The newest origin among other nodes' copies newer than `deleted_at`.
  static int64_t MaxOtherOrigin(const NameEntry& entry, absl::string_view self,
                                int64_t deleted_at);
  // The revision of `name`'s live tombstone, 0 when none.
  int64_t DeletedAtLocked(absl::string_view name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<EtcdClient> etcd_;
  Registry& registry_;
  const DirectoryOptions options_;
  const LeaseSource lease_;
  EpisodeLog mirror_log_;
  EpisodeLog registrar_log_;

  mutable Mutex mu_;
  std::map<std::string, NameEntry, std::less<>> names_ ABSL_GUARDED_BY(mu_);
  // Deletes still in etcd (their lease is short), by name: copies with an
  // older origin are stale wherever they are still listed.
  absl::flat_hash_map<std::string, int64_t> tombstones_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, LocalEntry> local_ ABSL_GUARDED_BY(mu_);
  // Pulled copies not yet seen by the registrar: their origin, by (name, version).
  absl::flat_hash_map<std::pair<std::string, uint64_t>, HolderRecord> replicas_ ABSL_GUARDED_BY(mu_);
  // Deletes this node applied for tombstones: not propagated again.
  uint64_t remote_deletes_ ABSL_GUARDED_BY(mu_) = 0;
  // The etcd revision the mirror is current as of.
  int64_t mirror_revision_ ABSL_GUARDED_BY(mu_) = 0;
  // Every node's original publishes and deletes (appended under mu_).
  ChangeFeed cluster_changes_{65536};
  // The feed position the registrar has registered up to.
  uint64_t registered_position_ ABSL_GUARDED_BY(mu_) = 0;
  struct RegisteredWaiter {
    uint64_t position;
    absl::Time deadline;
    Done done;
  };
  std::vector<RegisteredWaiter> waiters_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // waiters are answered at once
  // Runs the waiters that are due (registered, expired, or all at stop).
  void RunDueWaiters(bool stopping);
  absl::Status registrar_status_ ABSL_GUARDED_BY(mu_);

  // Wakes the registrar (feed appends, stop) and WaitRegistered callers.
  std::mutex signal_mu_;
  std::condition_variable signal_;
  uint64_t wakes_ = 0;      // guarded by signal_mu_
  bool stopping_ = false;   // guarded by signal_mu_

  // Held across a replica's publish and the recording of its origin.
  std::mutex replica_publish_mu_;

  // A lease of its own for tombstones, renewed by taking a new one.
  int64_t tombstone_lease_ = 0;  // guarded by tombstone_mu_
  absl::Time tombstone_lease_until_ = absl::InfinitePast();
  std::mutex tombstone_mu_;

  EtcdWatchCancel watch_cancel_;
  std::unique_ptr<ChangeFeed::Subscription> subscription_;
  std::thread mirror_;
  std::thread registrar_;
  std::atomic<bool> started_{false};
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_CLUSTER_DIRECTORY_H_
