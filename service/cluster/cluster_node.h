// One tensord node of a cluster: what it builds on etcd, in one object
// that owns construction, the join, and teardown in the right order.
//
//   membership      this node's record under its lease (cluster_membership)
//   members         who is live, and where (member_list)
//   records         durable names' order: read (record_reader), written
//                   in group commits (record_committer), followed
//                   (record_follower)
//   reads / writes  the read and write paths (latest_reads, cluster_writes)
//   cache copies    where cache names are, without etcd (cache_copies)
//   peers           channels to other nodes (peer_channels, peer_pull)
//   compactor       etcd's history kept bounded (history_compactor)
//
// docs/cluster.md states the guarantees these make true.
#ifndef TENSORD_SERVICE_CLUSTER_CLUSTER_NODE_H_
#define TENSORD_SERVICE_CLUSTER_CLUSTER_NODE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/cluster/cache_copies.h"
#include "service/cluster/cluster_membership.h"
#include "service/cluster/cluster_writes.h"
#include "service/cluster/history_compactor.h"
#include "service/cluster/kv_store.h"
#include "service/cluster/latest_reads.h"
#include "service/cluster/member_list.h"
#include "service/cluster/peer_channels.h"
#include "service/cluster/record_committer.h"
#include "service/cluster/record_follower.h"
#include "service/cluster/record_reader.h"
#include "service/cluster/replica_rules.h"
#include "service/cluster/work_pool.h"
#include "service/common/cluster_view.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"

namespace tensord {

struct ClusterNodeOptions {
  MembershipOptions membership;  // prefix, node name, lease TTL
  // This node's record: advertise address, handoff, version, start time.
  ClusterMember self;
  std::vector<ReplicaRule> replica_rules;
  // Keys per etcd transaction (etcd's --max-txn-ops).
  size_t max_txn_ops = 128;
  absl::Duration compaction_interval = absl::Minutes(5);
  PeerChannelOptions peers;
  // Cluster watch history, in items.
  size_t watch_history_items = 65536;
  // Threads for pulls and replica copies.
  size_t pull_threads = 8;
};

// Thread-safe.
class ClusterNode final : public ClusterAccess, public ClusterView {
 public:
  // Registers this node (ALREADY_EXISTS when a live node holds the name,
  // UNAVAILABLE when etcd cannot be reached), learns the members, and
  // reconciles what the registry holds with the records (held_reconciler)
  // before any read or write is served. `registry` must outlive the node.
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Join(std::shared_ptr<KvStore> store,
                                                           Registry& registry,
                                                           ClusterNodeOptions options);
  // Leave()s, then stops every thread.
  ~ClusterNode() override;

  // Revokes the lease (others stop listing this node at once) and refuses
  // writes from here on; reads go on. Idempotent.
  void Leave();

  // ClusterAccess.
  void EnsureLatest(std::vector<std::string> names, ReadDone done) override;
  void EnsureLatestSource(std::string name, SourceDone done) override;
  void EnsureGroup(int64_t cluster_group, NameCheck may_read, GroupReadDone done) override;
  absl::StatusOr<uint32_t> ReplicasFor(absl::string_view name, uint32_t requested,
                                       Retention retention) const override;
  void Commit(SealedVersion sealed, uint32_t replicas, CommitDone done) override;
  void CommitGroup(std::vector<SealedVersion> group, uint32_t replicas, GroupDone done) override;
  void Delete(std::string name, Done done) override;
  void Replicate(ReplicaSource source, Done done) override;
  void AnnounceCopies(std::vector<CopyLocation> copies) override;
  absl::StatusOr<CopyLocation> LocateCopy(absl::string_view name) const override;
  void ListNames(std::string prefix, std::string after, size_t max_names, ListDone done) override;
  void StartClusterWatch(std::string prefix, bool with_existing, uint64_t from_version,
                         size_t max_existing, WatchStartDone done) override;
  ChangeFeed* ClusterChanges() override { return &follower_->changes(); }
  ClusterStats stats() const override;

  // ClusterView.
  std::string node_name() const override { return options_.membership.node_name; }
  std::vector<ClusterMember> members() const override { return members_->members(); }
  uint64_t etcd_errors() const override { return store_->errors(); }

  const MemberList& member_list() const { return *members_; }
  HistoryCompactor& compactor() { return *compactor_; }

 private:
  ClusterNode(std::shared_ptr<KvStore> store, Registry& registry, ClusterNodeOptions options);
  absl::Status Start();
  // UNAVAILABLE once the node is leaving.
  absl::Status CheckWritable() const;

  const std::shared_ptr<KvStore> store_;
  Registry& registry_;
  const ClusterNodeOptions options_;
  std::atomic<bool> leaving_{false};
  std::atomic<int> group_lookups_{0};  // EnsureGroup lookups in flight

  // Built in this order by Start(), torn down in reverse by the destructor.
  std::unique_ptr<ClusterMembership> membership_;
  std::unique_ptr<MemberList> members_;
  std::unique_ptr<PeerChannels> peers_;
  std::unique_ptr<RecordReader> reader_;
  std::unique_ptr<RecordCommitter> committer_;
  std::unique_ptr<CacheCopies> cache_copies_;
  std::unique_ptr<WorkPool> pool_;
  std::unique_ptr<LatestReads> latest_;
  std::unique_ptr<ClusterWrites> writes_;
  std::unique_ptr<RecordFollower> follower_;
  std::unique_ptr<HistoryCompactor> compactor_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_CLUSTER_NODE_H_
