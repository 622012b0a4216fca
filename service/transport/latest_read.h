// The transport's one rule for reads: a read leases the version it serves
// here. A read of a name's latest version (version 0) in a cluster gets its
// lease from the cluster (ClusterAccess::EnsureLatest: the version the
// cluster ordered, copied here first when another node holds it); any
// other read, and every read on a single node, from the registry at once.
#ifndef TENSORD_SERVICE_TRANSPORT_LATEST_READ_H_
#define TENSORD_SERVICE_TRANSPORT_LATEST_READ_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"

namespace tensord {

// Whether a read of `version` must ask the cluster first.
inline bool AsksCluster(const ClusterAccess* cluster, uint64_t version) {
  return cluster != nullptr && version == 0;
}

// Runs `serve` with a lease on the version to serve (or why there is
// none): inline when nothing must be asked, else on a cluster thread. A
// template so the single-node path calls `serve` directly, with no
// type-erased callback on the small-call path.
template <typename Serve>
void LeaseForRead(Registry& registry, ClusterAccess* cluster, absl::string_view name,
                  uint64_t version, Serve&& serve) {
  if (!AsksCluster(cluster, version)) {
    std::forward<Serve>(serve)(registry.Acquire(name, version));
    return;
  }
  std::vector<std::string> names;
  names.emplace_back(name);
  cluster->EnsureLatest(std::move(names), [serve = std::forward<Serve>(serve)](
                                              std::vector<absl::StatusOr<Lease>> leases) mutable {
    std::move(serve)(std::move(leases.front()));
  });
}

// LeaseForRead for a reader that streams the bytes (Fetch): `serve` gets
// what to serve from, which may be the copy of the version still arriving
// from another node (ClusterAccess::EnsureLatestSource).
template <typename Serve>
void SourceForRead(Registry& registry, ClusterAccess* cluster, absl::string_view name,
                   uint64_t version, Serve&& serve) {
  if (!AsksCluster(cluster, version)) {
    absl::StatusOr<Lease> lease = registry.Acquire(name, version);
    if (!lease.ok()) {
      std::forward<Serve>(serve)(lease.status());
      return;
    }
    std::forward<Serve>(serve)(LatestSource{.lease = *std::move(lease), .filling = nullptr});
    return;
  }
  cluster->EnsureLatestSource(std::string(name), std::forward<Serve>(serve));
}

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_LATEST_READ_H_
