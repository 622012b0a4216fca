#include "service/cluster/etcd_cluster_reads.h"

#include <utility>

namespace tensord {

void EtcdClusterReads::PropagateDelete(std::string name, Done done) {
  auto shared = std::make_shared<Done>(std::move(done));
  read_through_->Enqueue(
      [directory = directory_, name = std::move(name), shared]() mutable {
        std::move(*shared)(directory->PropagateDelete(name));
      },
      [shared] {
        std::move(*shared)(absl::UnavailableError(
            "the server is shutting down; the delete was applied here but not recorded for the "
            "other nodes"));
      });
}

std::vector<ClusterVersion> EtcdClusterReads::ListNames(absl::string_view prefix,
                                                        absl::string_view after,
                                                        size_t max_names) const {
  std::vector<ClusterVersion> names;
  for (HolderRecord& record : directory_->ListNames(prefix, after, max_names)) {
    names.push_back(ClusterVersion{.name = std::move(record.name),
                                   .node = std::move(record.node),
                                   .address = std::move(record.address),
                                   .version = record.version,
                                   .origin = record.origin,
                                   .total_bytes = record.total_bytes,
                                   .crc32c = record.crc32c});
  }
  return names;
}

ClusterReadStats EtcdClusterReads::stats() const {
  const ReadThroughStats pulls = read_through_->stats();
  const DirectoryStats directory = directory_->stats();
  return ClusterReadStats{.pulls = pulls.pulls,
                          .pulled_bytes = pulls.pulled_bytes,
                          .pull_failures = pulls.pull_failures,
                          .pulls_joined = pulls.joined,
                          .remote_deletes = directory.remote_deletes,
                          .registered_names = directory.registered,
                          .directory_names = directory.names};
}

}  // namespace tensord
