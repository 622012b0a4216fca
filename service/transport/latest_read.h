// The transport's one rule for reads in a cluster: a read of a name's
// latest version (version 0) is served from the registry only after the
// cluster made sure the registry holds the latest it ordered
// (ClusterAccess::EnsureLatest); a read of a given version, or any read on
// a single node, is served at once.
#ifndef TENSORD_SERVICE_TRANSPORT_LATEST_READ_H_
#define TENSORD_SERVICE_TRANSPORT_LATEST_READ_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/registry/cluster_access.h"

namespace tensord {

// Runs `serve` with OK when the registry may answer the read, or with why
// not (NOT_FOUND, UNAVAILABLE): inline when nothing must be asked, else on
// a cluster thread.
// A template so the single-node path calls `serve` directly, with no
// type-erased callback on the small-call path.
template <typename Serve>
void WhenLatestIsHere(ClusterAccess* cluster, absl::string_view name, uint64_t version,
                      Serve&& serve) {
  if (cluster == nullptr || version != 0) {
    std::forward<Serve>(serve)(absl::OkStatus());
    return;
  }
  std::vector<std::string> names;
  names.emplace_back(name);
  cluster->EnsureLatest(
      std::move(names),
      [serve = std::forward<Serve>(serve)](std::vector<absl::Status> statuses) mutable {
        std::move(serve)(std::move(statuses.front()));
      });
}

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_LATEST_READ_H_
