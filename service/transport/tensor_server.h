// A running tensord gRPC server: the registry, the service and its
// listeners, wired together. server/ adds flags and signals.
#ifndef TENSORD_SERVICE_TRANSPORT_TENSOR_SERVER_H_
#define TENSORD_SERVICE_TRANSPORT_TENSOR_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/metrics/service_metrics.h"
#include "service/registry/registry.h"
#include "service/snapshot/snapshot_store.h"
#include "service/transport/handoff_server.h"
#include "service/transport/server_options.h"

namespace grpc {
class Server;
}

namespace tensord {

class TensorService;
class ConnectionListener;

class TensorServer {
 public:
  // Restores the snapshot (when options.snapshot_dir is set), then binds
  // every listen address and starts serving. INVALID_ARGUMENT for a
  // malformed address, UNAVAILABLE when one cannot be bound, DATA_LOSS for a
  // damaged snapshot under CorruptSnapshotPolicy::kRefuse.
  static absl::StatusOr<std::unique_ptr<TensorServer>> Start(const ServerOptions& options);
  ~TensorServer();

  // The addresses actually bound, with chosen ports filled in
  // ("127.0.0.1:43521", "unix:/run/tensord.sock").
  const std::vector<std::string>& bound_addresses() const { return bound_addresses_; }
  Registry& registry() { return *registry_; }
  const Registry& registry() const { return *registry_; }
  // Calls and bytes recorded by the gRPC service and the handoff socket.
  ServiceMetrics& metrics() { return *metrics_; }
  const ServiceMetrics& metrics() const { return *metrics_; }
  // The gRPC listeners' accept loop: open connections and the cap.
  const ConnectionListener& listener() const { return *listener_; }
  // Null when local handoff is off.
  const HandoffServer* handoff() const { return handoff_.get(); }
  // Watch calls open now.
  size_t open_watches() const;
  // Null for a single node (no --etcd-endpoints).
  const ClusterView* cluster() const { return cluster_.get(); }
  // Null for a single node.
  const ClusterAccess* cluster_access() const { return cluster_access_.get(); }
  // Null without --snapshot-dir.
  SnapshotStore* snapshots() { return snapshots_.get(); }

  // Stops accepting calls, lets in-flight calls run up to `grace`, then
  // cancels what is left. Safe to call from any thread, more than once.
  void Shutdown(absl::Duration grace);
  // Blocks until Shutdown() has completed, then stops local handoff (its
  // connections close, ending their leases and unsealed creates).
  void Wait();

 private:
  TensorServer() = default;

  std::unique_ptr<ServiceMetrics> metrics_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<SnapshotStore> snapshots_;
  std::unique_ptr<HandoffTokens> tokens_;
  std::unique_ptr<TensorService> service_;
  std::unique_ptr<HandoffServer> handoff_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ConnectionListener> listener_;
  std::vector<std::string> bound_addresses_;
  std::shared_ptr<const ClusterView> cluster_;
  std::shared_ptr<const ClusterAccess> cluster_access_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_TENSOR_SERVER_H_
