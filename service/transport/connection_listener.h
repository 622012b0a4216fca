// tensord's own accept loop for the gRPC listeners. gRPC's listener stops
// for good when accept4() fails with EMFILE (a flood of connections, or
// tensors and connections together using up RLIMIT_NOFILE), so tensord binds
// the listen addresses itself, accepts on one thread with GuardedAccept (the
// loop never dies at the fd limit), refuses connections beyond
// --max-connections at once, and hands every admitted connection to gRPC
// through an ExternalConnectionAcceptor (which runs the TLS handshake and
// HTTP/2 as for its own listener, with the server's channel arguments:
// handshake timeout, idle timeout, keepalive).
#ifndef TENSORD_SERVICE_TRANSPORT_CONNECTION_LISTENER_H_
#define TENSORD_SERVICE_TRANSPORT_CONNECTION_LISTENER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <grpcpp/server_builder.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/common/episode_log.h"
#include "service/common/guarded_accept.h"
#include "service/common/listen_address.h"
#include "service/common/scoped_fd.h"
#include "service/metrics/service_metrics.h"

namespace tensord {

class ConnectionListener {
 public:
  struct Endpoint {
    BoundListenAddress bound;
    // gRPC's side of this address (created before the server was built).
    std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor;
    bool tcp = true;  // false for a Unix socket
  };

  // Starts the accept thread; call after the gRPC server has started.
  static absl::StatusOr<std::unique_ptr<ConnectionListener>> Start(std::vector<Endpoint> endpoints,
                                                                   uint64_t max_connections,
                                                                   ServiceMetrics& metrics);
  // Closes the listening sockets (new connects are refused) and stops the
  // thread. Connections already handed to gRPC stay gRPC's. Idempotent.
  void Stop();
  ~ConnectionListener() { Stop(); }

  // Connections handed to gRPC that are still open (refreshed every second
  // and whenever the cap is reached).
  uint64_t open_connections() const { return open_.load(std::memory_order_relaxed); }
  uint64_t max_connections() const { return max_connections_; }

 private:
  ConnectionListener(std::vector<Endpoint> endpoints, uint64_t max_connections,
                     ServiceMetrics& metrics);
  void Run();
  // Accepts what is waiting on endpoint `index`; false when the process is
  // out of fds and the endpoint should rest before the next try.
  bool AcceptWaiting(size_t index, absl::Time now);
  void Admit(Endpoint& endpoint, int listener_fd, ScopedFd connection, absl::Time now);
  // Forgets connections gRPC has closed: an fd that is closed, or now names
  // a different file than the socket handed over.
  void Sweep(absl::Time now);

  struct Socket {
    size_t endpoint;
    int fd;
    absl::Time resting_until = absl::InfinitePast();
  };

  std::vector<Endpoint> endpoints_;
  std::vector<Socket> sockets_;
  const uint64_t max_connections_;
  ServiceMetrics& metrics_;
  GuardedAccept accept_;
  EpisodeLog cap_log_{"connection_cap_reached"};
  // Accept thread only: each handed fd and the inode of its socket.
  absl::flat_hash_map<int, ino_t> handed_;
  absl::Time last_sweep_ = absl::InfinitePast();
  std::atomic<uint64_t> open_{0};
  ScopedFd wake_;
  std::thread thread_;
  std::once_flag stopped_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_CONNECTION_LISTENER_H_
