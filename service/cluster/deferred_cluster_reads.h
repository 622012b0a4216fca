// The ClusterReads the server is started with in a cluster: the directory
// needs the server's registry and the node's lease, which exist only once
// the server runs and the node joined, so the real implementation is set
// afterwards. Until then this node answers from its own registry.
#ifndef TENSORD_SERVICE_CLUSTER_DEFERRED_CLUSTER_READS_H_
#define TENSORD_SERVICE_CLUSTER_DEFERRED_CLUSTER_READS_H_

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "service/common/cluster_reads.h"

namespace tensord {

class DeferredClusterReads final : public ClusterReads {
 public:
  // Set once; later calls go to `reads`.
  void Set(std::shared_ptr<ClusterReads> reads) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      reads_.swap(reads);
    }
    // The one replaced is destroyed here, outside the lock (it joins threads).
  }
  // Drops the implementation (before what it uses is destroyed); calls then
  // answer as before Set.
  void Reset() { Set(nullptr); }

  bool HoldsLatest(absl::string_view name) const override {
    std::shared_ptr<ClusterReads> reads = Get();
    return reads == nullptr || reads->HoldsLatest(name);
  }
  void PullLatest(std::string name, Done done) override {
    if (std::shared_ptr<ClusterReads> reads = Get(); reads != nullptr) {
      reads->PullLatest(std::move(name), std::move(done));
      return;
    }
    std::move(done)(absl::NotFoundError(
        "this node has not joined the cluster directory yet, or is leaving it"));
  }
  void PropagateDelete(std::string name, Done done) override {
    if (std::shared_ptr<ClusterReads> reads = Get(); reads != nullptr) {
      reads->PropagateDelete(std::move(name), std::move(done));
      return;
    }
    std::move(done)(absl::UnavailableError(
        "this node has not joined the cluster directory yet, or is leaving it"));
  }
  absl::StatusOr<uint32_t> ReplicasFor(absl::string_view name, uint32_t requested) const override {
    if (std::shared_ptr<ClusterReads> reads = Get(); reads != nullptr) {
      return reads->ReplicasFor(name, requested);
    }
    if (requested <= 1) return 1u;
    return absl::UnavailableError("this node has not joined the cluster directory yet, or is leaving it");
  }
  void AfterPut(std::string name, uint64_t version, uint32_t replicas, Done done) override {
    if (std::shared_ptr<ClusterReads> reads = Get(); reads != nullptr) {
      reads->AfterPut(std::move(name), version, replicas, std::move(done));
      return;
    }
    std::move(done)(replicas <= 1 ? absl::OkStatus() : NotJoined());
  }
  void Replicate(ClusterVersion source, Done done) override {
    if (std::shared_ptr<ClusterReads> reads = Get(); reads != nullptr) {
      reads->Replicate(std::move(source), std::move(done));
      return;
    }
    std::move(done)(NotJoined());
  }
  std::vector<ClusterVersion> ListNames(absl::string_view prefix, absl::string_view after,
                                        size_t max_names) const override {
    if (std::shared_ptr<ClusterReads> reads = Get(); reads != nullptr) {
      return reads->ListNames(prefix, after, max_names);
    }
    return {};
  }
  // The source outlives the forwarder's reset: the directory stays alive
  // as long as the server (main keeps it).
  WatchSource* ClusterWatchSource() const override {
    std::shared_ptr<ClusterReads> reads = Get();
    return reads == nullptr ? nullptr : reads->ClusterWatchSource();
  }
  ClusterReadStats stats() const override {
    std::shared_ptr<ClusterReads> reads = Get();
    return reads == nullptr ? ClusterReadStats{} : reads->stats();
  }

 private:
  static absl::Status NotJoined() {
    return absl::UnavailableError("this node has not joined the cluster directory yet, or is leaving it");
  }
  std::shared_ptr<ClusterReads> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_;
  }
  mutable std::mutex mu_;
  std::shared_ptr<ClusterReads> reads_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_DEFERRED_CLUSTER_READS_H_
