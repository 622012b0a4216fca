#include "bench/baselines.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tensord::bench {
namespace {

constexpr uint64_t kCallBytes = 1 << 20;  // per send()/recv() call

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool SendAll(int fd, const uint8_t* data, uint64_t size) {
  while (size > 0) {
    const ssize_t sent = ::send(fd, data, std::min(size, kCallBytes), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<uint64_t>(sent);
  }
  return true;
}

bool RecvAll(int fd, uint8_t* data, uint64_t size) {
  while (size > 0) {
    const ssize_t got = ::recv(fd, data, std::min(size, kCallBytes), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    data += got;
    size -= static_cast<uint64_t>(got);
  }
  return true;
}

}  // namespace

double TimeMemcpy(const Buffer& source, Buffer& destination, uint64_t bytes) {
  const Clock::time_point start = Clock::now();
  std::memcpy(destination.data(), source.data(), bytes);
  const double seconds = SecondsSince(start);
  // Keeps the copy observable.
  asm volatile("" : : "r"(destination.data()) : "memory");
  return seconds;
}

absl::StatusOr<double> TimeFirstTouch(uint64_t bytes) {
  const Clock::time_point start = Clock::now();
  void* mapping =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) return Errno("mmap");
  ::madvise(mapping, bytes, MADV_HUGEPAGE);
  auto* data = static_cast<volatile uint8_t*>(mapping);
  for (uint64_t offset = 0; offset < bytes; offset += 4096) data[offset] = 1;
  ::munmap(mapping, bytes);
  return SecondsSince(start);
}

absl::StatusOr<std::unique_ptr<RawTcpLink>> RawTcpLink::Open(const Buffer& source,
                                                             Buffer& destination) {
  std::unique_ptr<RawTcpLink> link(new RawTcpLink(source, destination));
  ScopedFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return Errno("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return Errno("bind/listen on 127.0.0.1:0");
  }
  link->connection_.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!link->connection_.valid()) return Errno("socket");
  // connect() completes against the backlog; the sender accepts afterwards.
  if (::connect(link->connection_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    return Errno("connect to 127.0.0.1");
  }
  SetNoDelay(link->connection_.get());
  link->sender_ = std::thread(&RawTcpLink::Serve, link.get(), std::move(listener));
  return link;
}

RawTcpLink::~RawTcpLink() {
  // The sender sees end of stream and returns.
  if (connection_.valid()) ::shutdown(connection_.get(), SHUT_RDWR);
  if (sender_.joinable()) sender_.join();
}

void RawTcpLink::Serve(ScopedFd listener) {
  ScopedFd connection(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!connection.valid()) return;
  SetNoDelay(connection.get());
  while (true) {
    uint64_t requested = 0;
    if (!RecvAll(connection.get(), reinterpret_cast<uint8_t*>(&requested), sizeof(requested)))
      return;
    requested = std::min(requested, source_.size());
    if (!SendAll(connection.get(), source_.data(), requested)) return;
  }
}

absl::StatusOr<double> RawTcpLink::Transfer(uint64_t bytes) {
  if (bytes > source_.size() || bytes > destination_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw TCP transfer of ", bytes, " bytes exceeds the buffers"));
  }
  const Clock::time_point start = Clock::now();
  if (!SendAll(connection_.get(), reinterpret_cast<const uint8_t*>(&bytes), sizeof(bytes)) ||
      !RecvAll(connection_.get(), destination_.data(), bytes)) {
    return Errno("raw TCP transfer");
  }
  return SecondsSince(start);
}

}  // namespace tensord::bench
