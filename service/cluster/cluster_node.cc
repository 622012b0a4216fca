#include "service/cluster/cluster_node.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/cluster/group_lookup.h"
#include "service/cluster/held_reconciler.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

// How long a joining node waits for its first read of the member list.
constexpr absl::Duration kMembersPatience = absl::Seconds(20);
// How long a group lookup waits for etcd's history at a revision (it comes
// at once; only a revision with no name record changed since waits it out).
constexpr absl::Duration kGroupLookupPatience = absl::Seconds(2);
// Group lookups in flight at once (each may hold a pool thread that long).
constexpr int kMaxGroupLookups = 4;

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Join(std::shared_ptr<KvStore> store,
                                                               Registry& registry,
                                                               ClusterNodeOptions options) {
  std::unique_ptr<ClusterNode> node(
      new ClusterNode(std::move(store), registry, std::move(options)));
  TENSORD_RETURN_IF_ERROR(node->Start());
  return node;
}

ClusterNode::ClusterNode(std::shared_ptr<KvStore> store, Registry& registry,
                         ClusterNodeOptions options)
    : store_(std::move(store)), registry_(registry), options_(std::move(options)) {}

absl::Status ClusterNode::Start() {
  const std::string& self = options_.membership.node_name;
  const std::string& prefix = options_.membership.prefix;
  membership_ = std::make_unique<ClusterMembership>(store_, options_.membership);
  TENSORD_RETURN_IF_ERROR(membership_->Join(options_.self, [this](ClusterMember& record) {
    record.host_bytes_used = registry_.host_bytes_used();
    record.host_bytes_limit = registry_.host_bytes_limit();
  }));
  members_ = std::make_unique<MemberList>(store_, prefix);
  members_->Start();
  if (!members_->AwaitFirstRead(kMembersPatience)) {
    return absl::UnavailableError(absl::StrCat("could not read the cluster's members from etcd in ",
                                               absl::FormatDuration(kMembersPatience)));
  }
  peers_ = std::make_unique<PeerChannels>(options_.peers);
  reader_ = std::make_unique<RecordReader>(
      store_, RecordReaderOptions{.prefix = prefix, .max_names_per_txn = options_.max_txn_ops});
  committer_ = std::make_unique<RecordCommitter>(
      store_, RecordCommitterOptions{.prefix = prefix, .max_ops_per_txn = options_.max_txn_ops});
  cache_copies_ = std::make_unique<CacheCopies>(CacheCopiesOptions{.self = self}, registry_,
                                                *members_, *peers_);
  pool_ = std::make_unique<WorkPool>(options_.pull_threads);
  latest_ = std::make_unique<LatestReads>(
      self, registry_, *reader_, *members_, *peers_, *pool_,
      [this](const std::string& name) { return cache_copies_->Locate(name); },
      [this](const std::string& name, int64_t origin) {
        return writes_->JoinHolders(name, origin);
      });
  writes_ = std::make_unique<ClusterWrites>(
      ClusterWritesOptions{.self = self,
                           .prefix = prefix,
                           .replica_rules = options_.replica_rules,
                           .hedge_after = options_.peers.stall_timeout},
      registry_, store_, *committer_, *members_, *peers_, *pool_, *cache_copies_, *latest_);
  // Followed from before the reconciliation, so a change between the two
  // is seen by one or the other.
  follower_ = std::make_unique<RecordFollower>(
      store_, prefix, *latest_, options_.watch_history_items, [this] {
        // The watch missed changes: judge everything held again, off its thread.
        pool_->Run(
            [this] {
              ReconcileHeld(registry_, *store_, *reader_, *writes_, *latest_,
                            options_.membership.prefix, options_.membership.node_name,
                            options_.max_txn_ops)
                  .IgnoreError();
            },
            nullptr);
      });
  follower_->Start();
  TENSORD_ASSIGN_OR_RETURN(ReconcileCounts counts,
                           ReconcileHeld(registry_, *store_, *reader_, *writes_, *latest_, prefix,
                                         self, options_.max_txn_ops));
  Log(LogLevel::kInfo, "cluster_held_reconciled",
      {{"node", self},
       {"checked", counts.checked},
       {"dropped", counts.dropped},
       {"ordered", counts.ordered},
       {"joined_holders", counts.joined}});
  compactor_ = std::make_unique<HistoryCompactor>(
      store_, *members_, self, prefix, options_.max_txn_ops, options_.compaction_interval);
  compactor_->Start();
  return absl::OkStatus();
}

ClusterNode::~ClusterNode() {
  Leave();
  // Stopped in an order where nothing running can reach what is gone.
  if (compactor_) compactor_->Stop();
  if (follower_) follower_->Stop();
  if (peers_) peers_->CancelAll();
  reader_.reset();
  committer_.reset();
  pool_.reset();
  cache_copies_.reset();
  compactor_.reset();
  follower_.reset();
  writes_.reset();
  latest_.reset();
  peers_.reset();
  if (members_) members_->Stop();
  members_.reset();
  membership_.reset();
}

void ClusterNode::Leave() {
  if (leaving_.exchange(true)) return;
  if (membership_) membership_->Leave();
}

absl::Status ClusterNode::CheckWritable() const {
  if (leaving_.load(std::memory_order_acquire)) {
    return absl::UnavailableError(absl::StrCat("node ", options_.membership.node_name,
                                               " is leaving the cluster and takes no writes"));
  }
  return absl::OkStatus();
}

void ClusterNode::EnsureLatest(std::vector<std::string> names, ReadDone done) {
  latest_->EnsureLatest(std::move(names), std::move(done));
}

void ClusterNode::EnsureLatestSource(std::string name, SourceDone done) {
  latest_->EnsureLatestSource(std::move(name), std::move(done));
}

void ClusterNode::EnsureGroup(int64_t cluster_group, NameCheck may_read, GroupReadDone done) {
  // A lookup may hold a pool thread for its patience (a revision with no
  // name record changed since): a bounded number at a time, so readers
  // asking for such revisions cannot take the threads pulls need.
  if (group_lookups_.fetch_add(1, std::memory_order_relaxed) >= kMaxGroupLookups) {
    group_lookups_.fetch_sub(1, std::memory_order_relaxed);
    std::move(done)(absl::ResourceExhaustedError(absl::StrCat(
        "cluster group ", cluster_group, ": ", kMaxGroupLookups,
        " group lookups are in flight on this node, the most it runs at once; retry")));
    return;
  }
  auto shared = std::make_shared<GroupReadDone>(std::move(done));
  pool_->Run(
      [this, cluster_group, may_read = std::move(may_read), shared] {
        absl::StatusOr<GroupMembers> members =
            FindGroupAt(*store_, options_.membership.prefix, cluster_group, kGroupLookupPatience);
        group_lookups_.fetch_sub(1, std::memory_order_relaxed);
        if (!members.ok()) {
          std::move (*shared)(members.status());
          return;
        }
        if (may_read) {
          for (const std::string& name : members->names) {
            if (absl::Status allowed = may_read(name); !allowed.ok()) {
              std::move (*shared)(allowed);
              return;
            }
          }
        }
        std::vector<std::string> names = members->names;
        latest_->EnsureLatest(
            std::move(names), [cluster_group, members = *std::move(members),
                               shared](std::vector<absl::StatusOr<Lease>> leases) mutable {
              std::move (*shared)(WholeGroup(cluster_group, members, std::move(leases)));
            });
      },
      [this, shared] {
        group_lookups_.fetch_sub(1, std::memory_order_relaxed);
        std::move (*shared)(absl::UnavailableError("the node is shutting down"));
      });
}

absl::StatusOr<uint32_t> ClusterNode::ReplicasFor(absl::string_view name, uint32_t requested,
                                                  Retention retention) const {
  TENSORD_RETURN_IF_ERROR(CheckWritable());
  return writes_->ReplicasFor(name, requested, retention);
}

void ClusterNode::Commit(SealedVersion sealed, uint32_t replicas, CommitDone done) {
  if (absl::Status writable = CheckWritable(); !writable.ok()) {
    std::move(done)(writable);
    return;
  }
  writes_->Commit(std::move(sealed), replicas, std::move(done));
}

void ClusterNode::CommitGroup(std::vector<SealedVersion> group, uint32_t replicas, GroupDone done) {
  if (absl::Status writable = CheckWritable(); !writable.ok()) {
    std::move(done)(writable);
    return;
  }
  writes_->CommitGroup(std::move(group), replicas, std::move(done));
}

void ClusterNode::Delete(std::string name, Done done) {
  if (absl::Status writable = CheckWritable(); !writable.ok()) {
    std::move(done)(writable);
    return;
  }
  writes_->Delete(std::move(name), std::move(done));
}

void ClusterNode::Replicate(ReplicaSource source, Done done) {
  if (absl::Status writable = CheckWritable(); !writable.ok()) {
    std::move(done)(writable);
    return;
  }
  writes_->Replicate(std::move(source), std::move(done));
}

void ClusterNode::AnnounceCopies(std::vector<CopyLocation> copies) {
  cache_copies_->Remember(std::move(copies));
}

absl::StatusOr<CopyLocation> ClusterNode::LocateCopy(absl::string_view name) const {
  return cache_copies_->Find(name);
}

void ClusterNode::ListNames(std::string prefix, std::string after, size_t max_names,
                            ListDone done) {
  auto shared = std::make_shared<ListDone>(std::move(done));
  pool_->Run(
      [this, prefix = std::move(prefix), after = std::move(after), max_names, shared] {
        std::move (*shared)(follower_->ListNames(prefix, after, max_names));
      },
      [shared] { std::move (*shared)(absl::UnavailableError("the node is shutting down")); });
}

void ClusterNode::StartClusterWatch(std::string prefix, bool with_existing, uint64_t from_version,
                                    size_t max_existing, WatchStartDone done) {
  auto shared = std::make_shared<WatchStartDone>(std::move(done));
  pool_->Run(
      [this, prefix = std::move(prefix), with_existing, from_version, max_existing, shared] {
        std::move (*shared)(
            follower_->StartWatch(prefix, with_existing, from_version, max_existing));
      },
      [shared] { std::move (*shared)(absl::UnavailableError("the node is shutting down")); });
}

ClusterStats ClusterNode::stats() const {
  const LatestReadsStats reads = latest_->stats();
  return ClusterStats{.pulls = reads.pulls,
                      .pulled_bytes = reads.pulled_bytes,
                      .pull_failures = reads.pull_failures,
                      .pulls_joined = reads.pulls_joined,
                      .stale_copies_dropped = reads.stale_copies_dropped,
                      .record_reads = reader_->names_read(),
                      .record_read_txns = reader_->transactions(),
                      .record_writes = committer_->changes_committed(),
                      .record_write_txns = committer_->transactions(),
                      .cache_locations = cache_copies_->locations()};
}

}  // namespace tensord
