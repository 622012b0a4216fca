#include "tests/integration/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tensord::testing {
namespace {

// One proxied connection: bytes read from one side wait here until the
// other side takes them.
struct Pair {
  int client = -1;
  int upstream = -1;
  std::string to_upstream;
  std::string to_client;
  bool client_eof = false;
  bool upstream_eof = false;
};

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int ConnectTo(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Reads what `from` has into `buffer`; false at EOF or error.
bool ReadInto(int from, std::string& buffer) {
  char chunk[64 << 10];
  const ssize_t got = ::read(from, chunk, sizeof(chunk));
  if (got > 0) {
    buffer.append(chunk, static_cast<size_t>(got));
    return true;
  }
  return got < 0 && (errno == EAGAIN || errno == EINTR);
}

// Writes what it can of `buffer` to `to`; false on error.
bool WriteFrom(int to, std::string& buffer) {
  if (buffer.empty()) return true;
  const ssize_t put = ::send(to, buffer.data(), buffer.size(), MSG_NOSIGNAL);
  if (put > 0) {
    buffer.erase(0, static_cast<size_t>(put));
    return true;
  }
  return put < 0 && (errno == EAGAIN || errno == EINTR);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(std::string target_host,
                                                          int target_port) {
  std::unique_ptr<TcpProxy> proxy(new TcpProxy());
  proxy->target_host_ = std::move(target_host);
  proxy->target_port_ = target_port;
  proxy->listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (proxy->listener_ < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(proxy->listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(proxy->listener_, 128) != 0 ||
      ::getsockname(proxy->listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("proxy listener: ", strerror(errno)));
  }
  proxy->port_ = ntohs(address.sin_port);
  proxy->wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (proxy->wake_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  proxy->thread_ = std::thread([raw = proxy.get()] { raw->Loop(); });
  return proxy;
}

TcpProxy::~TcpProxy() {
  stopping_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  if (listener_ >= 0) ::close(listener_);
  if (wake_ >= 0) ::close(wake_);
}

std::string TcpProxy::http_endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

void TcpProxy::Pause() {
  paused_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_, &one, sizeof(one));
}

void TcpProxy::Resume() {
  paused_.store(false);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_, &one, sizeof(one));
}

void TcpProxy::Loop() {
  std::vector<Pair> pairs;
  std::vector<pollfd> polled;
  while (!stopping_.load()) {
    const bool paused = paused_.load();
    polled.clear();
    polled.push_back({wake_, POLLIN, 0});
    // Paused: nothing is read, written or accepted (the kernel queues new
    // connections; bytes wait in socket buffers), as in a partition.
    polled.push_back({paused ? -1 : listener_, POLLIN, 0});
    for (const Pair& pair : pairs) {
      short client_events = 0;
      short upstream_events = 0;
      if (!paused) {
        if (!pair.client_eof) client_events |= POLLIN;
        if (!pair.to_client.empty()) client_events |= POLLOUT;
        if (!pair.upstream_eof) upstream_events |= POLLIN;
        if (!pair.to_upstream.empty()) upstream_events |= POLLOUT;
      }
      polled.push_back({pair.client, client_events, 0});
      polled.push_back({pair.upstream, upstream_events, 0});
    }
    if (::poll(polled.data(), polled.size(), 200) < 0 && errno != EINTR) return;
    if (polled[0].revents & POLLIN) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t got = ::read(wake_, &count, sizeof(count));
      continue;  // the pause state may have changed: poll afresh
    }
    if (paused_.load()) continue;
    for (size_t i = 0; i < pairs.size(); ++i) {
      Pair& pair = pairs[i];
      const short client = polled[2 + 2 * i].revents;
      const short upstream = polled[3 + 2 * i].revents;
      bool broken = false;
      if (client & (POLLIN | POLLHUP | POLLERR)) {
        if (!ReadInto(pair.client, pair.to_upstream)) pair.client_eof = true;
      }
      if (upstream & (POLLIN | POLLHUP | POLLERR)) {
        if (!ReadInto(pair.upstream, pair.to_client)) pair.upstream_eof = true;
      }
      broken |= !WriteFrom(pair.upstream, pair.to_upstream);
      broken |= !WriteFrom(pair.client, pair.to_client);
      // One side is done and the other has nothing left to take: close both.
      if (broken || (pair.client_eof && pair.to_upstream.empty() && pair.to_client.empty()) ||
          (pair.upstream_eof && pair.to_client.empty())) {
        CloseFd(pair.client);
        CloseFd(pair.upstream);
      }
    }
    std::erase_if(pairs, [](const Pair& pair) { return pair.client < 0; });
    if (polled[1].revents & POLLIN) {
      while (true) {
        const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (client < 0) break;
        const int upstream = ConnectTo(target_host_, target_port_);
        if (upstream < 0) {
          ::close(client);
          continue;
        }
        int one = 1;
        ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pairs.push_back(Pair{.client = client, .upstream = upstream});
      }
    }
  }
  for (Pair& pair : pairs) {
    CloseFd(pair.client);
    CloseFd(pair.upstream);
  }
}

}  // namespace tensord::testing
