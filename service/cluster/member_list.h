// The live members of the cluster, followed from etcd's <prefix>/nodes/
// keys (each on its node's lease, so a node that stops renewing drops out
// within its TTL). The only place a node learns where another node serves:
// a holder named anywhere else is trusted only if it is listed here, and
// only at the address it lists.
#ifndef TENSORD_SERVICE_CLUSTER_MEMBER_LIST_H_
#define TENSORD_SERVICE_CLUSTER_MEMBER_LIST_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "service/cluster/kv_store.h"
#include "service/cluster/prefix_follower.h"
#include "service/common/cluster_view.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe. Lifecycle: construct, Start(), Stop() (or destroy).
class MemberList {
 public:
  MemberList(std::shared_ptr<KvStore> store, std::string prefix);
  ~MemberList();

  void Start();
  void Stop();
  // Blocks until the first read is in (or `timeout`); whether it is.
  bool AwaitFirstRead(absl::Duration timeout) const;

  // Every live member, by name.
  std::vector<ClusterMember> members() const;
  // The live member ranked first for `name` (RankMembers' order), found
  // without copying the list: a cache put asks it for every item.
  std::optional<ClusterMember> FirstRanked(absl::string_view name) const;
  // `node` when it is a live member.
  std::optional<ClusterMember> Find(absl::string_view node) const;
  // Bumped whenever the list changes.
  uint64_t generation() const;

  static std::string NodesPrefix(absl::string_view prefix);

 private:
  void Apply(const EtcdKeyValue& kv, bool deleted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string nodes_prefix_;
  mutable Mutex mu_;
  std::map<std::string, ClusterMember, std::less<>> members_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<PrefixFollower> follower_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_MEMBER_LIST_H_
