#include "service/transport/handoff_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/errno_status.h"
#include "service/common/log.h"
#include "service/common/unix_socket.h"

namespace tensord {
namespace {

struct Connection {
  ScopedFd socket;
  std::unique_ptr<HandoffSession> session;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HandoffServer>> HandoffServer::Start(const HandoffOptions& options,
                                                                    Registry& registry,
                                                                    HandoffTokens& tokens,
                                                                    ServiceMetrics& metrics) {
  std::unique_ptr<HandoffServer> server(new HandoffServer(options, registry, tokens, metrics));
  absl::StatusOr<ScopedFd> listener = ListenSeqpacket(options.socket_path, 0660);
  if (!listener.ok()) return listener.status();
  server->listener_ = std::move(*listener);
  server->wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!server->wake_.valid()) return ErrnoStatus(errno, "eventfd");
  server->thread_ = std::thread([raw = server.get()] { raw->Run(); });
  return server;
}

void HandoffServer::Stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_.get(), &one, sizeof(one));
  thread_.join();
  connections_.store(0, std::memory_order_relaxed);
  leases_.store(0, std::memory_order_relaxed);
  if (listener_.valid()) ::unlink(options_.socket_path.c_str());
}

bool HandoffServer::Authorized(const PeerCredentials& peer) const {
  const std::vector<uid_t>& uids = options_.allowed_uids;
  if (uids.empty() ? peer.uid == ::getuid()
                   : std::find(uids.begin(), uids.end(), peer.uid) != uids.end()) {
    return true;
  }
  const std::vector<gid_t>& gids = options_.allowed_gids;
  return std::find(gids.begin(), gids.end(), peer.gid) != gids.end();
}

void HandoffServer::Run() {
  std::vector<Connection> connections;
  std::vector<pollfd> polled;
  constexpr int kReapIntervalMs = 1000;
  absl::Time last_reap = absl::Now();
  while (true) {
    polled.clear();
    polled.push_back({wake_.get(), POLLIN, 0});
    polled.push_back({listener_.get(), POLLIN, 0});
    for (const Connection& connection : connections) {
      polled.push_back({connection.socket.get(), POLLIN, 0});
    }
    int ready = ::poll(polled.data(), polled.size(), kReapIntervalMs);
    if (ready < 0 && errno != EINTR) {
      Log(LogLevel::kError, "handoff_poll_failed", {{"errno", errno}});
      return;
    }
    const absl::Time now = absl::Now();
    if (polled[0].revents != 0) return;  // shutting down

    // Serve ready connections; a closed or misbehaving one is dropped, which
    // ends every lease and create it held.
    for (size_t i = 0; i < connections.size(); ++i) {
      short events = polled[i + 2].revents;
      if (events == 0) continue;
      Connection& connection = connections[i];
      bool keep = (events & POLLIN) != 0;
      if (keep) {
        absl::StatusOr<ReceivedPacket> packet = ReceivePacket(connection.socket.get());
        if (!packet.ok()) {
          keep = false;
        } else {
          // Requests never carry fds; one that does is closed by `packet`.
          HandoffSession::Reply reply = connection.session->Handle(packet->bytes, now);
          absl::Status sent = SendPacket(connection.socket.get(), reply.bytes, reply.fd);
          if (!sent.ok()) {
            Log(LogLevel::kWarning, "handoff_send_failed",
                {{"peer_pid", connection.session->peer().pid}, {"error", sent.ToString()}});
            keep = false;
          }
        }
      }
      if (!keep) {
        Log(LogLevel::kDebug, "handoff_disconnect",
            {{"peer_pid", connection.session->peer().pid},
             {"leases_released", connection.session->lease_count()},
             {"creates_dropped", connection.session->create_count()}});
        connection.socket.Reset();
      }
    }
    std::erase_if(connections, [](const Connection& c) { return !c.socket.valid(); });

    if (polled[1].revents & POLLIN) {
      ScopedFd accepted(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (accepted.valid()) {
        absl::StatusOr<PeerCredentials> peer = GetPeerCredentials(accepted.get());
        if (peer.ok()) {
          bool authorized = Authorized(*peer);
          Log(LogLevel::kDebug, "handoff_connect",
              {{"peer_pid", peer->pid}, {"peer_uid", peer->uid}, {"authorized", authorized}});
          connections.push_back(Connection{
              std::move(accepted), std::make_unique<HandoffSession>(
                                       registry_, tokens_, options_.limits, *peer, authorized,
                                       metrics_)});
        }
      }
    }

    if (now - last_reap >= absl::Milliseconds(kReapIntervalMs)) {
      last_reap = now;
      for (Connection& connection : connections) connection.session->ReapExpiredCreates(now);
    }
    // Already a pass over every connection per event (the poll set), so the
    // gauges stay current at no extra order of cost.
    size_t leases = 0;
    for (const Connection& connection : connections) leases += connection.session->lease_count();
    connections_.store(connections.size(), std::memory_order_relaxed);
    leases_.store(leases, std::memory_order_relaxed);
  }
}

}  // namespace tensord
