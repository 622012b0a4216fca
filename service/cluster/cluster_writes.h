// The write path of a cluster node: a durable put is ordered by etcd (its
// name record written, in a group commit) before it becomes the latest
// here, and copied to replicas-1 other live nodes before it is
// acknowledged; a cache put stands here at once and its place is announced
// to the name's home node. Deletes remove the record. Also the other side
// of a replica: Replicate pulls an ordered version and joins the record's
// holders.
#ifndef TENSORD_SERVICE_CLUSTER_CLUSTER_WRITES_H_
#define TENSORD_SERVICE_CLUSTER_CLUSTER_WRITES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "service/cluster/cache_copies.h"
#include "service/cluster/kv_store.h"
#include "service/cluster/latest_reads.h"
#include "service/cluster/member_list.h"
#include "service/cluster/peer_channels.h"
#include "service/cluster/record_committer.h"
#include "service/cluster/replica_rules.h"
#include "service/cluster/work_pool.h"
#include "service/common/mutex.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"

namespace tensord {

struct ClusterWritesOptions {
  std::string self;    // this node's name
  std::string prefix;  // the cluster's etcd prefix
  std::vector<ReplicaRule> replica_rules;
  // A replica target that has not answered within this (plus the time its
  // bytes take at 1 GB/s) gets company: the copy is also asked of the
  // next-ranked node, so one slow or paused node does not hold the put.
  absl::Duration hedge_after = absl::Seconds(2);
};

// Thread-safe. Everything it is given must outlive it.
class ClusterWrites {
 public:
  ClusterWrites(ClusterWritesOptions options, Registry& registry, std::shared_ptr<KvStore> store,
                RecordCommitter& committer, MemberList& members, PeerChannels& peers,
                WorkPool& pool, CacheCopies& cache_copies, LatestReads& latest);
  // Stops resolving unanswered commits (their versions are dropped).
  ~ClusterWrites();

  absl::StatusOr<uint32_t> ReplicasFor(absl::string_view name, uint32_t requested,
                                       Retention retention) const;
  void Commit(SealedVersion sealed, uint32_t replicas, ClusterAccess::CommitDone done);
  void CommitGroup(std::vector<SealedVersion> group, uint32_t replicas,
                   ClusterAccess::GroupDone done);
  void Delete(std::string name, ClusterAccess::Done done);
  void Replicate(ReplicaSource source, ClusterAccess::Done done);

  // Adds this node to the holders of `name`'s record while it still
  // orders `origin` (compare-and-swap on the key). OK too when the record
  // moved on (a newer put or a delete: the copy is moot). Blocks.
  absl::Status JoinHolders(const std::string& name, int64_t origin);

 private:
  // Replaces `copy`, a cache copy of an ordered version, by a durable copy
  // of the same bytes and origin (a replica asked of a node that had read it).
  absl::Status KeepDurably(const TensorVersion& copy);
  // Copies an installed durable version to replicas-1 other live nodes.
  void SendReplicas(VersionInfo info, uint32_t replicas, ClusterAccess::CommitDone done);
  void SendGroupReplicas(std::vector<VersionInfo> infos, uint32_t replicas,
                         ClusterAccess::GroupDone done);
  // After a commit that etcd ordered but this node could not install:
  // the record is removed again if it still names the version, so no node
  // waits for a copy that does not exist.
  void Unrecord(const std::string& name, int64_t origin);
  // A commit whose answer was lost (etcd out of reach mid-call) may still
  // have been made: the sealed versions are kept while the records are
  // read again (off the caller's thread, for as long as etcd does not
  // answer: the record may name them, and no other node has them); a record
  // that names this put by its id gets its version installed here, so the
  // name is served rather than stuck with a holder that threw its bytes away.
  void ResolveUnanswered(std::vector<std::string> names, std::string put_id,
                         std::shared_ptr<std::vector<SealedVersion>> sealed);
  // A new put id: this process's prefix and a counter.
  std::string NextPutId();
  // The resolver's thread: one pass over the unanswered commits while etcd
  // answers, then a pause.
  void ResolveLoop();
  // Whether `unanswered` is settled (installed, or known not needed);
  // UNAVAILABLE while etcd cannot be asked.
  struct Unanswered {
    std::vector<std::string> names;
    std::string put_id;
    std::shared_ptr<std::vector<SealedVersion>> sealed;
  };
  absl::StatusOr<bool> Resolve(Unanswered& unanswered);

  const ClusterWritesOptions options_;
  Registry& registry_;
  const std::shared_ptr<KvStore> store_;
  RecordCommitter& committer_;
  MemberList& members_;
  PeerChannels& peers_;
  WorkPool& pool_;
  CacheCopies& cache_copies_;
  LatestReads& latest_;
  std::atomic<uint64_t> next_group_{0};
  std::atomic<uint64_t> next_put_{0};
  const std::string group_prefix_;  // unique to this process
  Mutex unanswered_mu_;
  CondVar unanswered_cv_;
  std::vector<Unanswered> unanswered_ ABSL_GUARDED_BY(unanswered_mu_);
  bool stopping_ ABSL_GUARDED_BY(unanswered_mu_) = false;
  std::thread resolver_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_CLUSTER_WRITES_H_
