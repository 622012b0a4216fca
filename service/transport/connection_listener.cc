#include "service/transport/connection_listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/errno_status.h"
#include "service/common/log.h"

namespace tensord {
namespace {

constexpr absl::Duration kTick = absl::Seconds(1);
// After EMFILE with no spare fd, a listener rests this long instead of
// spinning on a socket that stays readable.
constexpr absl::Duration kRestAtFdLimit = absl::Milliseconds(100);
// At the cap, closed connections are looked for at most this often.
constexpr absl::Duration kSweepAtCapInterval = absl::Milliseconds(20);
// Accepts per listener per wake-up, so one flooded address cannot starve
// the others or the tick.
constexpr int kAcceptsPerWake = 256;

}  // namespace

ConnectionListener::ConnectionListener(std::vector<Endpoint> endpoints, uint64_t max_connections,
                                       ServiceMetrics& metrics)
    : endpoints_(std::move(endpoints)), max_connections_(max_connections), metrics_(metrics) {
  for (size_t index = 0; index < endpoints_.size(); ++index) {
    for (const ScopedFd& socket : endpoints_[index].bound.sockets) {
      sockets_.push_back(Socket{index, socket.get()});
    }
  }
}

absl::StatusOr<std::unique_ptr<ConnectionListener>> ConnectionListener::Start(
    std::vector<Endpoint> endpoints, uint64_t max_connections, ServiceMetrics& metrics) {
  std::unique_ptr<ConnectionListener> listener(
      new ConnectionListener(std::move(endpoints), max_connections, metrics));
  listener->wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!listener->wake_.valid()) return ErrnoStatus(errno, "eventfd(listener)");
  listener->thread_ = std::thread([raw = listener.get()] { raw->Run(); });
  return listener;
}

void ConnectionListener::Stop() {
  // TensorServer::Shutdown may run on several threads at once.
  std::call_once(stopped_, [this] {
    if (!thread_.joinable()) return;  // Start() failed before the thread
    uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(wake_.get(), &one, sizeof(one));
    thread_.join();
    sockets_.clear();
    endpoints_.clear();  // closes the listening sockets, removes socket files
  });
}

void ConnectionListener::Run() {
  std::vector<pollfd> polled;
  std::vector<size_t> polled_sockets;
  absl::Time next_tick = absl::Now() + kTick;
  while (true) {
    absl::Time now = absl::Now();
    polled.clear();
    polled_sockets.clear();
    polled.push_back({wake_.get(), POLLIN, 0});
    absl::Time wake_at = next_tick;
    for (size_t i = 0; i < sockets_.size(); ++i) {
      if (sockets_[i].resting_until > now) {
        wake_at = std::min(wake_at, sockets_[i].resting_until);
        continue;
      }
      polled.push_back({sockets_[i].fd, POLLIN, 0});
      polled_sockets.push_back(i);
    }
    const int timeout_ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(wake_at - now) + 1, 0, 1000));
    const int ready = ::poll(polled.data(), polled.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      Log(LogLevel::kError, "listener_poll_failed",
          {{"error", ErrnoStatus(errno, "poll").message()}});
      absl::SleepFor(kRestAtFdLimit);
      continue;
    }
    if (polled[0].revents != 0) return;  // Stop()
    now = absl::Now();
    for (size_t k = 0; k < polled_sockets.size(); ++k) {
      if ((polled[k + 1].revents & (POLLIN | POLLERR | POLLHUP)) == 0) continue;
      Socket& socket = sockets_[polled_sockets[k]];
      if (!AcceptWaiting(polled_sockets[k], now)) socket.resting_until = now + kRestAtFdLimit;
    }
    if (now >= next_tick) {
      next_tick = now + kTick;
      Sweep(now);
      accept_.RestoreSpare();
      cap_log_.Tick(now);
      FdExhaustionLog().Tick(now);
    }
  }
}

bool ConnectionListener::AcceptWaiting(size_t index, absl::Time now) {
  const Socket socket = sockets_[index];
  Endpoint& endpoint = endpoints_[socket.endpoint];
  for (int i = 0; i < kAcceptsPerWake; ++i) {
    GuardedAccept::Result result = accept_.Accept(socket.fd, endpoint.bound.address);
    switch (result.outcome) {
      case GuardedAccept::Outcome::kAccepted:
        Admit(endpoint, socket.fd, std::move(result.connection), now);
        break;
      case GuardedAccept::Outcome::kNoneWaiting: return true;
      case GuardedAccept::Outcome::kDroppedAtFdLimit:
        metrics_.AddConnectionRefused(Listener::kGrpc, ConnectionRefusal::kAtFdLimit);
        break;
      case GuardedAccept::Outcome::kRetryLater: return false;
      case GuardedAccept::Outcome::kTransientError:
        // ECONNABORTED and the like: that connection is gone, others wait.
        break;
    }
  }
  return true;
}

void ConnectionListener::Admit(Endpoint& endpoint, int listener_fd, ScopedFd connection,
                               absl::Time now) {
  if (handed_.size() >= max_connections_ && now - last_sweep_ >= kSweepAtCapInterval) Sweep(now);
  if (handed_.size() >= max_connections_) {
    metrics_.AddConnectionRefused(Listener::kGrpc, ConnectionRefusal::kAtCap);
    cap_log_.Note(endpoint.bound.address,
                  absl::StrCat("--max-connections=", max_connections_, " reached"), now);
    return;  // `connection` closes here
  }
  struct stat identity {};
  if (::fstat(connection.get(), &identity) != 0) return;
  if (endpoint.tcp) {
    // gRPC sets this on the connections it accepts itself; small calls wait
    // on Nagle's algorithm without it.
    const int one = 1;
    ::setsockopt(connection.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  const int fd = connection.Release();
  handed_[fd] = identity.st_ino;
  open_.store(handed_.size(), std::memory_order_relaxed);
  metrics_.AddConnectionAccepted(Listener::kGrpc);
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters parameters;
  parameters.listener_fd = listener_fd;
  parameters.fd = fd;  // gRPC owns it from here, and closes it
  endpoint.acceptor->HandleNewConnection(&parameters);
}

void ConnectionListener::Sweep(absl::Time now) {
  last_sweep_ = now;
  absl::erase_if(handed_, [](const std::pair<const int, ino_t>& entry) {
    struct stat identity {};
    return ::fstat(entry.first, &identity) != 0 || identity.st_ino != entry.second;
  });
  open_.store(handed_.size(), std::memory_order_relaxed);
}

}  // namespace tensord
