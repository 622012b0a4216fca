// What the gRPC service and the metrics exporter may know of cluster
// membership, in plain types: the transport reports members without
// depending on etcd (service/cluster implements this).
#ifndef TENSORD_SERVICE_COMMON_CLUSTER_VIEW_H_
#define TENSORD_SERVICE_COMMON_CLUSTER_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tensord {

// One node's registration, as it publishes it in etcd.
struct ClusterMember {
  std::string node_name;
  // host:port other nodes and clients reach its gRPC service on.
  std::string advertise_address;
  // Whether it serves zero-copy local handoff (a client on its host can map).
  bool handoff_available = false;
  uint64_t host_bytes_used = 0;
  uint64_t host_bytes_limit = 0;
  std::string server_version;
  // When the process started, Unix milliseconds.
  int64_t start_time_unix_ms = 0;
  // Unique to one process lifetime, so a node recognises its own earlier
  // registration after etcd comes back.
  std::string instance_id;

  bool operator==(const ClusterMember&) const = default;
};

// Implementations are thread-safe; every method answers from memory.
class ClusterView {
 public:
  virtual ~ClusterView() = default;
  virtual std::string node_name() const = 0;
  // The live members as last read from etcd, this node included, by name.
  virtual std::vector<ClusterMember> members() const = 0;
  // Failed etcd calls since start.
  virtual uint64_t etcd_errors() const = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_CLUSTER_VIEW_H_
