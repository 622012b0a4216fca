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

 private:
  std::shared_ptr<ClusterReads> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_;
  }
  mutable std::mutex mu_;
  std::shared_ptr<ClusterReads> reads_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_DEFERRED_CLUSTER_READS_H_
