// The cluster side of one tensord process, from construction to teardown:
// made before the server starts (the server reads the cluster through
// deferred(), which refuses calls until the node joined), joined once the
// server listens, and taken down exactly once: Leave() then Stop() on a
// normal shutdown, or the destructor on any other way out.
#ifndef TENSORD_SERVER_CLUSTER_NODE_HOST_H_
#define TENSORD_SERVER_CLUSTER_NODE_HOST_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/cluster/cluster_config.h"
#include "service/cluster/cluster_node.h"
#include "service/cluster/deferred_cluster.h"
#include "service/cluster/etcd_client.h"
#include "service/transport/tensor_server.h"

namespace tensord {

class ClusterNodeHost {
 public:
  // Connects nothing yet: the etcd client dials lazily. `advertise_flag`
  // is --advertise-address (empty: chosen from the bound addresses).
  static absl::StatusOr<std::unique_ptr<ClusterNodeHost>> Create(ClusterConfig config,
                                                                 std::string advertise_flag);
  ~ClusterNodeHost();
  ClusterNodeHost(const ClusterNodeHost&) = delete;
  ClusterNodeHost& operator=(const ClusterNodeHost&) = delete;

  // For ServerOptions::cluster and ::cluster_access.
  const std::shared_ptr<DeferredCluster>& deferred() const { return deferred_; }
  const std::string& node_name() const { return config_.membership.node_name; }

  // Registers this node (advertised at one of `server`'s bound addresses)
  // and starts its mirror, watches and renewals; from here on the server's
  // cluster calls reach it. Logs why on failure.
  absl::Status Join(TensorServer& server, const ServerOptions& options);

  // Others stop counting on this node at once; writes are refused from
  // here on, reads go on (while the server drains). Idempotent.
  void Leave();

  // After the server drained (nothing calls into the node): stops its
  // threads. Idempotent; the destructor does both.
  void Stop();

 private:
  ClusterNodeHost(ClusterConfig config, std::string advertise_flag,
                  std::shared_ptr<EtcdClient> etcd);

  const ClusterConfig config_;
  const std::string advertise_flag_;
  const std::shared_ptr<EtcdClient> etcd_;
  const std::shared_ptr<DeferredCluster> deferred_;
  std::shared_ptr<ClusterNode> node_;
};

}  // namespace tensord

#endif  // TENSORD_SERVER_CLUSTER_NODE_HOST_H_
