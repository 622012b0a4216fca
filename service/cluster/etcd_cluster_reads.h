// ClusterReads on etcd: the transport's one entry to the cluster directory,
// read-through pulls and replicated puts, built once the node has joined.
#ifndef TENSORD_SERVICE_CLUSTER_ETCD_CLUSTER_READS_H_
#define TENSORD_SERVICE_CLUSTER_ETCD_CLUSTER_READS_H_

#include <memory>
#include <string>
#include <vector>

#include "service/cluster/cluster_directory.h"
#include "service/cluster/put_replication.h"
#include "service/cluster/read_through.h"
#include "service/common/cluster_reads.h"

namespace tensord {

class EtcdClusterReads final : public ClusterReads {
 public:
  EtcdClusterReads(std::shared_ptr<ClusterDirectory> directory,
                   std::shared_ptr<ReadThrough> read_through,
                   std::unique_ptr<PutReplication> replication)
      : directory_(std::move(directory)),
        replication_(std::move(replication)),
        read_through_(std::move(read_through)) {}

  bool HoldsLatest(absl::string_view name) const override { return directory_->HoldsLatest(name); }
  void PullLatest(std::string name, Done done) override {
    read_through_->PullLatest(std::move(name), std::move(done));
  }
  void PropagateDelete(std::string name, Done done) override;
  absl::StatusOr<uint32_t> ReplicasFor(absl::string_view name, uint32_t requested) const override {
    return replication_->ReplicasFor(name, requested);
  }
  void AfterPut(std::string name, uint64_t version, uint32_t replicas, Done done) override {
    replication_->AfterPut(std::move(name), version, replicas, std::move(done));
  }
  void Replicate(ClusterVersion source, Done done) override {
    replication_->Replicate(std::move(source), std::move(done));
  }
  std::vector<ClusterVersion> ListNames(absl::string_view prefix, absl::string_view after,
                                        size_t max_names) const override;

  WatchSource* ClusterWatchSource() const override { return directory_.get(); }
  ClusterReadStats stats() const override;

  const ReadThrough& read_through() const { return *read_through_; }
  const ClusterDirectory& directory() const { return *directory_; }

 private:
  // Destroyed last to first: the pull threads (read_through_) are joined
  // while the replication their jobs use still lives.
  const std::shared_ptr<ClusterDirectory> directory_;
  const std::unique_ptr<PutReplication> replication_;
  const std::shared_ptr<ReadThrough> read_through_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_ETCD_CLUSTER_READS_H_
