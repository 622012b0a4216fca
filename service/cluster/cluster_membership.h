// This node's membership of a tensord cluster, kept in etcd: a record under
// <prefix>/nodes/<node-name> attached to an etcd lease, so the node leaves
// the member list when it stops renewing (crash, partition) within the TTL.
// etcd decides liveness; tensord runs no failure detector of its own.
#ifndef TENSORD_SERVICE_CLUSTER_CLUSTER_MEMBERSHIP_H_
#define TENSORD_SERVICE_CLUSTER_CLUSTER_MEMBERSHIP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/cluster/kv_store.h"
#include "service/common/cluster_view.h"
#include "service/common/episode_log.h"
#include "service/common/mutex.h"

namespace tensord {

struct MembershipOptions {
  // Keys live under <prefix>/nodes/; "/tensord" by default. Must start with
  // '/' and not end with one.
  std::string prefix = "/tensord";
  std::string node_name;
  // The lease's TTL: how long a node that stopped renewing stays listed.
  absl::Duration lease_ttl = absl::Seconds(5);
};

// INVALID_ARGUMENT naming the bad value.
absl::Status ValidateMembershipOptions(const MembershipOptions& options);

// Fills the capacity fields of this node's record (host bytes); called on
// the membership thread every renewal.
using CapacitySource = std::function<void(ClusterMember&)>;

// Thread-safe. Lifecycle: construct, Join() once, Leave() (or destroy).
// While joined a thread renews the lease every TTL/3, rewrites the record
// when its capacity changed (at most once per TTL), and rereads the member
// list. When etcd cannot be reached the node goes on serving; the failure is
// logged once per episode and retried with backoff, and when etcd answers
// again the node renews its lease or, if etcd lost it, takes a new lease and
// registers again.
class ClusterMembership : public ClusterView {
 public:
  ClusterMembership(std::shared_ptr<KvStore> etcd, MembershipOptions options);
  ~ClusterMembership() override;
  ClusterMembership(const ClusterMembership&) = delete;
  ClusterMembership& operator=(const ClusterMembership&) = delete;

  // Registers `self` (its node_name is the options' one; its instance_id is
  // filled here) and starts the renewal thread. ALREADY_EXISTS, naming both
  // nodes, when another live node holds the name; UNAVAILABLE when etcd
  // cannot be reached (a node does not start without seeing etcd once, so
  // a wrong endpoint shows at start rather than as a silent single node).
  absl::Status Join(ClusterMember self, CapacitySource capacity);

  // Stops renewing and revokes the lease, so the node leaves the member
  // list at once. Idempotent; the destructor calls it.
  void Leave();

  // The live members, read from etcd now. Records that do not decode are
  // skipped and logged.
  absl::StatusOr<std::vector<ClusterMember>> ListNodes();

  // ClusterView: answered from the list read at the last renewal.
  std::string node_name() const override { return options_.node_name; }
  std::vector<ClusterMember> members() const override;
  uint64_t etcd_errors() const override { return etcd_->errors(); }

  // The lease this node's member record hangs on (nothing else is on it:
  // name records are not); 0 while it holds none (etcd lost it, or not
  // joined).
  int64_t lease_id() const { return current_lease_.load(std::memory_order_acquire); }

  // Key of a node's record under `prefix`.
  static std::string NodeKey(absl::string_view prefix, absl::string_view node_name);

 private:
  // Puts this node's record under a lease of its own, unless another node's
  // record holds the name. `lease` is ours; our own older record (same
  // instance id, e.g. from before etcd lost our lease) is replaced.
  absl::Status Register(int64_t lease, const ClusterMember& record);
  // Takes a new lease and registers under it.
  absl::Status RegisterWithNewLease();
  // One renewal round; OK when etcd answered every call.
  absl::Status RenewOnce();
  void RenewLoop();
  void NoteFailure(absl::string_view where, const absl::Status& status);
  ClusterMember CurrentRecord();

  const std::shared_ptr<KvStore> etcd_;
  const MembershipOptions options_;
  const std::string key_;
  EpisodeLog unreachable_log_;
  // The name taken by another node while this one could not renew.
  EpisodeLog name_conflict_log_;

  // Touched only by Join and the renewal thread (which Join starts).
  ClusterMember self_;
  CapacitySource capacity_;
  int64_t lease_ = 0;                      // 0: none held (etcd lost it, or not yet granted)
  std::atomic<int64_t> current_lease_{0};  // lease_, for other threads
  absl::Duration granted_ttl_;
  std::string last_written_record_;
  absl::Time last_written_at_ = absl::InfinitePast();

  mutable Mutex mu_;
  CondVar stopped_;  // Leave() wakes the renewal thread
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ClusterMember> members_ ABSL_GUARDED_BY(mu_);
  std::thread renewer_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_CLUSTER_MEMBERSHIP_H_
