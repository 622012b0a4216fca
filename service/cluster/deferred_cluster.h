// The ClusterAccess and ClusterView a cluster server starts with: the node
// needs the server's registry and bound addresses, which exist only once
// the server runs, so the ClusterNode is set after it joined. Until then,
// and once it is taken away at shutdown, cluster reads and writes answer
// UNAVAILABLE: a node that is not in the cluster cannot know what is latest.
#ifndef TENSORD_SERVICE_CLUSTER_DEFERRED_CLUSTER_H_
#define TENSORD_SERVICE_CLUSTER_DEFERRED_CLUSTER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "service/cluster/cluster_node.h"
#include "service/common/cluster_view.h"
#include "service/common/mutex.h"
#include "service/registry/cluster_access.h"

namespace tensord {

class DeferredCluster final : public ClusterAccess, public ClusterView {
 public:
  explicit DeferredCluster(std::string node_name) : node_name_(std::move(node_name)) {}

  // Later calls go to `node`; null takes it away (calls already in it go on).
  void Set(std::shared_ptr<ClusterNode> node) {
    MutexLock lock(&mu_);
    node_.swap(node);
  }

  void EnsureLatest(std::vector<std::string> names, ReadDone done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->EnsureLatest(std::move(names), std::move(done));
      return;
    }
    std::vector<absl::StatusOr<Lease>> refused;
    for (size_t i = 0; i < names.size(); ++i) refused.emplace_back(NotJoined());
    std::move(done)(std::move(refused));
  }
  void EnsureLatestSource(std::string name, SourceDone done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->EnsureLatestSource(std::move(name), std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  void EnsureGroup(int64_t cluster_group, NameCheck may_read, GroupReadDone done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->EnsureGroup(cluster_group, std::move(may_read), std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  absl::StatusOr<uint32_t> ReplicasFor(absl::string_view name, uint32_t requested,
                                       Retention retention) const override {
    if (std::shared_ptr<ClusterNode> node = Get())
      return node->ReplicasFor(name, requested, retention);
    return NotJoined();
  }
  void Commit(SealedVersion sealed, uint32_t replicas, CommitDone done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->Commit(std::move(sealed), replicas, std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  void CommitGroup(std::vector<SealedVersion> group, uint32_t replicas, GroupDone done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->CommitGroup(std::move(group), replicas, std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  void Delete(std::string name, Done done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->Delete(std::move(name), std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  void Replicate(ReplicaSource source, Done done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->Replicate(std::move(source), std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  void AnnounceCopies(std::vector<CopyLocation> copies) override {
    if (std::shared_ptr<ClusterNode> node = Get()) node->AnnounceCopies(std::move(copies));
  }
  absl::StatusOr<CopyLocation> LocateCopy(absl::string_view name) const override {
    if (std::shared_ptr<ClusterNode> node = Get()) return node->LocateCopy(name);
    return NotJoined();
  }
  void ListNames(std::string prefix, std::string after, size_t max_names, ListDone done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->ListNames(std::move(prefix), std::move(after), max_names, std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  void StartClusterWatch(std::string prefix, bool with_existing, uint64_t from_version,
                         size_t max_existing, WatchStartDone done) override {
    if (std::shared_ptr<ClusterNode> node = Get()) {
      node->StartClusterWatch(std::move(prefix), with_existing, from_version, max_existing,
                              std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  // The feed outlives the forwarder's reset: main keeps the node until
  // the server stopped.
  ChangeFeed* ClusterChanges() override {
    std::shared_ptr<ClusterNode> node = Get();
    return node == nullptr ? nullptr : node->ClusterChanges();
  }
  ClusterStats stats() const override {
    std::shared_ptr<ClusterNode> node = Get();
    return node == nullptr ? ClusterStats{} : node->stats();
  }

  std::string node_name() const override { return node_name_; }
  std::vector<ClusterMember> members() const override {
    std::shared_ptr<ClusterNode> node = Get();
    return node == nullptr ? std::vector<ClusterMember>{} : node->members();
  }
  uint64_t etcd_errors() const override {
    std::shared_ptr<ClusterNode> node = Get();
    return node == nullptr ? 0 : node->etcd_errors();
  }

 private:
  static absl::Status NotJoined() {
    return absl::UnavailableError("this node has not joined the cluster yet, or has left it");
  }
  std::shared_ptr<ClusterNode> Get() const {
    MutexLock lock(&mu_);
    return node_;
  }
  const std::string node_name_;
  mutable Mutex mu_;
  std::shared_ptr<ClusterNode> node_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_DEFERRED_CLUSTER_H_
