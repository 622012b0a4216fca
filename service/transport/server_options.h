// Everything the gRPC server needs to know; server/server_flags.cc fills it from flags.
#ifndef TENSORD_SERVICE_TRANSPORT_SERVER_OPTIONS_H_
#define TENSORD_SERVICE_TRANSPORT_SERVER_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "service/common/cluster_view.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"
#include "service/security/active_streams.h"
#include "service/security/token_file.h"
#include "service/snapshot/snapshot_store.h"
#include "service/transport/handoff_server.h"

namespace tensord {

// TLS for the TCP listeners (Unix sockets stay plaintext: the file mode
// guards them). PEM contents, not paths.
struct TlsServerOptions {
  std::string cert_chain_pem;
  std::string private_key_pem;
  // When set, clients must present a certificate signed by this CA (mTLS).
  std::string client_ca_pem;
  bool enabled() const { return !cert_chain_pem.empty(); }
};

// Admission and timeouts of the gRPC listeners (transport/
// connection_listener and gRPC's channel arguments).
struct ConnectionLimits {
  // Most gRPC connections open at once (all listeners); 0 = derived from
  // RLIMIT_NOFILE (DefaultMaxConnections).
  uint64_t max_connections = 0;
  // A connection must finish its TLS handshake and send the HTTP/2 preface
  // and SETTINGS within this, or it is closed.
  absl::Duration handshake_timeout = absl::Seconds(5);
  // A connection with no call for this long is closed (gRPC's
  // max_connection_idle: a GOAWAY and the close at once, so clients close
  // theirs sooner, ClientOptions::connection_idle_timeout). Zero keeps idle
  // connections.
  absl::Duration idle_timeout = absl::Minutes(10);
};

struct ServerOptions {
  // "host:port" (port 0 picks a free one) or "unix:PATH".
  std::vector<std::string> listen_addresses = {"127.0.0.1:50051"};
  // Connection admission and timeouts of the gRPC listeners.
  ConnectionLimits connections;
  RegistryOptions registry;
  // Largest single tensor a put may store (--max-tensor-bytes).
  uint64_t max_tensor_bytes = uint64_t{4} << 30;
  // Data bytes per fetch chunk message.
  uint32_t chunk_bytes = 1 << 20;
  // Largest gRPC message either way; must exceed chunk_bytes plus framing.
  uint32_t max_message_bytes = 8 << 20;
  // Graceful shutdown: in-flight calls get this long to finish.
  absl::Duration shutdown_grace = absl::Seconds(10);
  // Local handoff; off when handoff.socket_path is empty.
  HandoffOptions handoff;
  TlsServerOptions tls;
  // Serve plaintext TCP on addresses other hosts can reach (see
  // security/listen_policy.h); refused otherwise.
  bool allow_insecure_remote = false;
  // Bearer tokens allowed to call (--tokens-file); empty turns auth off.
  std::vector<TokenGrant> token_grants;
  // Cap on open Put/Fetch streams and their idle timeout.
  StreamLimits stream_limits;
  // Most Watch calls open at once (--max-watches); they are long-lived, so
  // they have their own cap instead of taking stream places.
  uint64_t max_watches = 1024;
  // Snapshots of the durable tensors (--snapshot-dir); off when empty.
  // Restored at start, before serving.
  std::string snapshot_dir;
  CorruptSnapshotPolicy corrupt_snapshot = CorruptSnapshotPolicy::kRefuse;
  // This node's cluster membership (--etcd-endpoints), reported by
  // GetServerInfo and the metrics; null for a single node.
  std::shared_ptr<const ClusterView> cluster;
  // The cluster's read and write paths (reads of a latest version wait for
  // EnsureLatest, writes go through Commit). Null for a single node.
  std::shared_ptr<ClusterAccess> cluster_access;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_SERVER_OPTIONS_H_
