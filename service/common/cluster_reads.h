// What the gRPC service and the handoff server need of the cluster to
// answer for every name (read-through) and to delete everywhere, in plain
// types: service/cluster implements it on etcd, so the transport links no
// etcd code.
#ifndef TENSORD_SERVICE_COMMON_CLUSTER_READS_H_
#define TENSORD_SERVICE_COMMON_CLUSTER_READS_H_

#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tensord {

// Thread-safe.
class ClusterReads {
 public:
  using Done = absl::AnyInvocable<void(absl::Status) &&>;
  virtual ~ClusterReads() = default;

  // Whether this node may answer a read of `name`'s latest version from
  // its own registry: no other node holds a newer version by the
  // directory. From memory, no etcd call: cheap enough for every read.
  virtual bool HoldsLatest(absl::string_view name) const = 0;

  // Makes this node hold the cluster's latest version of `name`, pulling it
  // from a live holder when another node has a newer one (or this node has
  // none). Concurrent calls for one name share one pull. `done` runs once,
  // on a cluster thread (or inline when nothing needs pulling): OK when the
  // registry now holds the latest, NOT_FOUND when no node holds `name`,
  // UNAVAILABLE naming the holders when none could be reached.
  virtual void PullLatest(std::string name, Done done) = 0;

  // Propagates a delete that this node has applied: every other node drops
  // its copy. `done` runs once the directory has recorded it.
  virtual void PropagateDelete(std::string name, Done done) = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_CLUSTER_READS_H_
