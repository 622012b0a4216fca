// The local handoff socket: accepts connections, checks peer credentials,
// and runs each connection's HandoffSession on one event-loop thread.
#ifndef TENSORD_SERVICE_TRANSPORT_HANDOFF_SERVER_H_
#define TENSORD_SERVICE_TRANSPORT_HANDOFF_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "service/common/episode_log.h"
#include "service/common/guarded_accept.h"
#include "service/common/scoped_fd.h"
#include "service/metrics/service_metrics.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"
#include "service/transport/handoff_session.h"
#include "service/transport/handoff_tokens.h"

namespace tensord {

struct HandoffOptions {
  // Socket path; created with mode 0660 (owner and group).
  std::string socket_path;
  // Peers whose uid or gid is listed are authorised; others must present a
  // token. An empty uid list means the server's own uid.
  std::vector<uid_t> allowed_uids;
  std::vector<gid_t> allowed_gids;
  HandoffLimits limits;
  // In a cluster: reads of a latest version and seals wait for the cluster
  // (off the event loop: the connection waits, the others go on). Not
  // owned; null for a single node.
  ClusterAccess* cluster = nullptr;
  // Most connections open at once; more are closed as soon as accepted.
  // 0 = derived from RLIMIT_NOFILE (DefaultMaxHandoffConnections).
  uint64_t max_connections = 0;
};

struct HandoffConnection;
class HandoffResumes;

class HandoffServer {
 public:
  // Binds the socket and starts the event-loop thread. `registry`, `tokens`
  // and `metrics` must outlive the server.
  static absl::StatusOr<std::unique_ptr<HandoffServer>> Start(const HandoffOptions& options,
                                                              Registry& registry,
                                                              HandoffTokens& tokens,
                                                              ServiceMetrics& metrics);
  // Stops the thread, closes every connection (ending its leases and
  // creates) and removes the socket file. Idempotent; counts read 0 after.
  void Stop();
  ~HandoffServer() { Stop(); }

  const std::string& socket_path() const { return options_.socket_path; }
  // For metrics and tests: refreshed after every event the loop handles.
  size_t connection_count() const { return connections_.load(std::memory_order_relaxed); }
  size_t lease_count() const { return leases_.load(std::memory_order_relaxed); }
  uint64_t max_connections() const { return max_connections_; }

 private:
  HandoffServer(const HandoffOptions& options, Registry& registry, HandoffTokens& tokens,
                ServiceMetrics& metrics)
      : options_(options), registry_(registry), tokens_(tokens), metrics_(metrics) {}
  void Run();
  bool Authorized(const PeerCredentials& peer) const;
  // Accepts what waits on the listener into `connections`; false when the
  // process is out of fds and the listener should rest.
  bool AcceptWaiting(std::vector<HandoffConnection>& connections, absl::Time now);
  // Sends `reply`; false (logged) when the connection broke.
  bool SendReply(HandoffConnection& connection, HandoffSession::Reply reply);

  const HandoffOptions options_;
  Registry& registry_;
  HandoffTokens& tokens_;
  ServiceMetrics& metrics_;
  ScopedFd listener_;
  ScopedFd wake_;  // eventfd that ends Run()
  // Replies that waited for the cluster, handed back to the event loop.
  std::shared_ptr<HandoffResumes> resumes_;
  uint64_t max_connections_ = 0;
  uint64_t next_connection_id_ = 1;  // the event loop's
  GuardedAccept accept_;
  EpisodeLog cap_log_{"handoff_connection_cap_reached"};
  std::thread thread_;
  std::atomic<size_t> connections_{0};
  std::atomic<size_t> leases_{0};
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_HANDOFF_SERVER_H_
