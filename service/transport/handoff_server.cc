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
#include "service/common/fd_limits.h"
#include "service/common/log.h"
#include "service/common/mutex.h"
#include "service/common/unix_socket.h"

namespace tensord {

struct HandoffConnection {
  ScopedFd socket;
  std::unique_ptr<HandoffSession> session;
  uint64_t id = 0;
  // Its reply waits for the cluster: not read from until it is sent.
  bool waiting = false;
};

// Finishers of replies that waited for the cluster, from cluster threads to
// the event loop, with an eventfd of their own that wakes it. Shared with
// every pending resume, so a late one after Stop() finds it alive.
class HandoffResumes {
 public:
  HandoffResumes() : wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  int fd() const { return wake_.get(); }

  void Push(uint64_t connection, HandoffSession::Finisher finisher) {
    {
      MutexLock lock(&mu_);
      ready_.emplace_back(connection, std::move(finisher));
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(wake_.get(), &one, sizeof(one));
  }

  std::vector<std::pair<uint64_t, HandoffSession::Finisher>> Take() {
    uint64_t count = 0;
    [[maybe_unused]] ssize_t read = ::read(wake_.get(), &count, sizeof(count));
    MutexLock lock(&mu_);
    return std::exchange(ready_, {});
  }

 private:
  ScopedFd wake_;
  Mutex mu_;
  std::vector<std::pair<uint64_t, HandoffSession::Finisher>> ready_ ABSL_GUARDED_BY(mu_);
};

namespace {

// After EMFILE with no spare fd, the listener rests this long instead of
// spinning on a socket that stays readable.
constexpr absl::Duration kRestAtFdLimit = absl::Milliseconds(100);
constexpr int kAcceptsPerWake = 64;

}  // namespace

absl::StatusOr<std::unique_ptr<HandoffServer>> HandoffServer::Start(const HandoffOptions& options,
                                                                    Registry& registry,
                                                                    HandoffTokens& tokens,
                                                                    ServiceMetrics& metrics) {
  std::unique_ptr<HandoffServer> server(new HandoffServer(options, registry, tokens, metrics));
  absl::StatusOr<ScopedFd> listener = ListenSeqpacket(options.socket_path, 0660);
  if (!listener.ok()) return listener.status();
  server->listener_ = std::move(*listener);
  server->max_connections_ = options.max_connections != 0
                                 ? options.max_connections
                                 : DefaultMaxHandoffConnections(OpenFileLimit());
  server->wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!server->wake_.valid()) return ErrnoStatus(errno, "eventfd");
  server->resumes_ = std::make_shared<HandoffResumes>();
  if (server->resumes_->fd() < 0) return ErrnoStatus(errno, "eventfd");
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

bool HandoffServer::AcceptWaiting(std::vector<HandoffConnection>& connections, absl::Time now) {
  for (int i = 0; i < kAcceptsPerWake; ++i) {
    GuardedAccept::Result result = accept_.Accept(listener_.get(), "handoff socket");
    switch (result.outcome) {
      case GuardedAccept::Outcome::kNoneWaiting: return true;
      case GuardedAccept::Outcome::kTransientError: continue;
      case GuardedAccept::Outcome::kDroppedAtFdLimit:
        metrics_.AddConnectionRefused(Listener::kHandoff, ConnectionRefusal::kAtFdLimit);
        continue;
      case GuardedAccept::Outcome::kRetryLater: return false;
      case GuardedAccept::Outcome::kAccepted: break;
    }
    if (connections.size() >= max_connections_) {
      metrics_.AddConnectionRefused(Listener::kHandoff, ConnectionRefusal::kAtCap);
      cap_log_.Note(socket_path(),
                    absl::StrCat("--max-handoff-connections=", max_connections_, " reached"), now);
      continue;  // the connection closes here
    }
    absl::StatusOr<PeerCredentials> peer = GetPeerCredentials(result.connection.get());
    if (!peer.ok()) continue;
    const bool authorized = Authorized(*peer);
    Log(LogLevel::kDebug, "handoff_connect",
        {{"peer_pid", peer->pid}, {"peer_uid", peer->uid}, {"authorized", authorized}});
    metrics_.AddConnectionAccepted(Listener::kHandoff);
    connections.push_back(HandoffConnection{
        .socket = std::move(result.connection),
        .session = std::make_unique<HandoffSession>(registry_, tokens_, options_.limits, *peer,
                                                    authorized, metrics_, options_.cluster),
        .id = next_connection_id_++});
  }
  return true;
}

bool HandoffServer::SendReply(HandoffConnection& connection, HandoffSession::Reply reply) {
  absl::Status sent = SendPacket(connection.socket.get(), reply.bytes, reply.fds);
  if (!sent.ok()) {
    Log(LogLevel::kWarning, "handoff_send_failed",
        {{"peer_pid", connection.session->peer().pid}, {"error", sent.ToString()}});
    return false;
  }
  return true;
}

void HandoffServer::Run() {
  std::vector<HandoffConnection> connections;
  std::vector<pollfd> polled;
  constexpr int kReapIntervalMs = 1000;
  absl::Time last_reap = absl::Now();
  absl::Time listener_resting_until = absl::InfinitePast();
  while (true) {
    polled.clear();
    polled.push_back({wake_.get(), POLLIN, 0});
    // A resting listener stays in the set (indices stay fixed) but unpolled.
    polled.push_back({listener_resting_until > absl::Now() ? -1 : listener_.get(), POLLIN, 0});
    polled.push_back({resumes_->fd(), POLLIN, 0});
    for (const HandoffConnection& connection : connections) {
      // One request at a time per connection: one waiting for the cluster
      // is not read from until its reply is sent.
      polled.push_back({connection.waiting ? -1 : connection.socket.get(), POLLIN, 0});
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
    if (polled[2].revents & POLLIN) {
      for (auto& [id, finisher] : resumes_->Take()) {
        auto it = std::find_if(connections.begin(), connections.end(),
                               [id = id](const HandoffConnection& c) { return c.id == id; });
        if (it == connections.end()) continue;
        it->waiting = false;
        if (!SendReply(*it, std::move(finisher)())) it->socket.Reset();
      }
    }
    for (size_t i = 0; i < connections.size(); ++i) {
      short events = polled[i + 3].revents;
      if (events == 0) continue;
      HandoffConnection& connection = connections[i];
      if (connection.waiting) continue;
      bool keep = (events & POLLIN) != 0;
      if (keep) {
        // Batch requests (many names) may be larger than a single one.
        // A put_many request carries its memfd; other requests none (the
        // session refuses one that does). More than one fails the packet.
        absl::StatusOr<ReceivedPacket> packet =
            ReceivePacket(connection.socket.get(), kMaxBatchPacketBytes, /*max_fds=*/1);
        if (!packet.ok()) {
          keep = false;
        } else {
          std::optional<HandoffSession::Reply> reply = connection.session->Handle(
              packet->bytes, std::move(packet->fd), now,
              [resumes = resumes_, id = connection.id](HandoffSession::Finisher finisher) {
                resumes->Push(id, std::move(finisher));
              });
          if (!reply.has_value()) {
            connection.waiting = true;
          } else {
            keep = SendReply(connection, *std::move(reply));
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
    // A connection whose reply waits for the cluster stays until it came:
    // its finisher runs on its session.
    std::erase_if(connections,
                  [](const HandoffConnection& c) { return !c.socket.valid() && !c.waiting; });

    if (polled[1].revents & POLLIN) {
      if (!AcceptWaiting(connections, now)) listener_resting_until = now + kRestAtFdLimit;
    }

    if (now - last_reap >= absl::Milliseconds(kReapIntervalMs)) {
      last_reap = now;
      for (HandoffConnection& connection : connections) connection.session->ReapExpiredCreates(now);
      accept_.RestoreSpare();
      cap_log_.Tick(now);
      FdExhaustionLog().Tick(now);
    }
    // Already a pass over every connection per event (the poll set), so the
    // gauges stay current at no extra order of cost.
    size_t leases = 0;
    for (const HandoffConnection& connection : connections)
      leases += connection.session->lease_count();
    connections_.store(connections.size(), std::memory_order_relaxed);
    leases_.store(leases, std::memory_order_relaxed);
  }
}

}  // namespace tensord
