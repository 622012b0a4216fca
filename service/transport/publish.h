// The transport's one rule for writes: a version becomes the latest of its
// name through here. On a single node the registry publishes it at once;
// in a cluster it is sealed here and handed to ClusterAccess::Commit, which
// has etcd order it (durable names) before it is installed and answered.
#ifndef TENSORD_SERVICE_TRANSPORT_PUBLISH_H_
#define TENSORD_SERVICE_TRANSPORT_PUBLISH_H_

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"

namespace tensord {

// Publishes `pending` (Registry::Publish's checks and `expected_crc32c`)
// and runs `done` with the outcome: inline on a single node or when a check
// fails, else on a cluster thread once the cluster has it (with `replicas`
// copies).
template <typename Done>
void PublishLatest(Registry& registry, ClusterAccess* cluster, PendingVersion pending,
                   std::optional<uint32_t> expected_crc32c, uint32_t replicas, Done&& done) {
  if (cluster == nullptr) {
    std::forward<Done>(done)(registry.Publish(std::move(pending), expected_crc32c));
    return;
  }
  absl::StatusOr<SealedVersion> sealed = registry.Seal(std::move(pending), expected_crc32c);
  if (!sealed.ok()) {
    std::forward<Done>(done)(absl::StatusOr<VersionInfo>(sealed.status()));
    return;
  }
  cluster->Commit(*std::move(sealed), replicas, std::forward<Done>(done));
}

// The same for an atomic group, each item with `replicas` copies.
template <typename Done>
void PublishGroupLatest(Registry& registry, ClusterAccess* cluster,
                        std::vector<PendingVersion> group,
                        std::span<const std::optional<uint32_t>> expected_crc32c, uint32_t replicas,
                        Done&& done) {
  if (cluster == nullptr) {
    std::forward<Done>(done)(registry.PublishGroup(std::move(group), expected_crc32c));
    return;
  }
  absl::StatusOr<std::vector<SealedVersion>> sealed =
      registry.SealGroup(std::move(group), expected_crc32c);
  if (!sealed.ok()) {
    std::forward<Done>(done)(absl::StatusOr<std::vector<VersionInfo>>(sealed.status()));
    return;
  }
  cluster->CommitGroup(*std::move(sealed), replicas, std::forward<Done>(done));
}

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_PUBLISH_H_
