#include "service/common/listen_address.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"
#include "service/common/unix_socket.h"

namespace tensord {
namespace {

struct HostPort {
  std::string host;
  uint32_t port = 0;
};

absl::StatusOr<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  HostPort parsed;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &parsed.port) || parsed.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listen address '", address, "' is not host:port (port 0..65535) or unix:PATH"));
  }
  parsed.host = address.substr(0, colon);
  if (parsed.host.size() >= 2 && parsed.host.front() == '[' && parsed.host.back() == ']') {
    parsed.host = parsed.host.substr(1, parsed.host.size() - 2);
  }
  return parsed;
}

// "unix:PATH" and "unix:///PATH" (gRPC's two spellings).
absl::StatusOr<std::string> UnixPathOf(const std::string& address) {
  std::string path = address.substr(5);
  if (absl::StartsWith(path, "//")) {
    if (!absl::StartsWith(path, "///")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "listen address '", address, "' has an authority; write unix:///ABSOLUTE/PATH"));
    }
    path = path.substr(2);
  }
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("listen address '", address, "' has no path"));
  }
  return path;
}

uint16_t PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
}

void SetPort(sockaddr* address, uint16_t port) {
  if (address->sa_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(address)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in*>(address)->sin_port = htons(port);
  }
}

bool IsIpv6Any(const sockaddr* address) {
  return address->sa_family == AF_INET6 &&
         std::memcmp(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, &in6addr_any,
                     sizeof(in6_addr)) == 0;
}

absl::StatusOr<BoundListenAddress> BindTcp(const std::string& address) {
  absl::StatusOr<HostPort> host_port = SplitHostPort(address);
  if (!host_port.ok()) return host_port.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* resolved = nullptr;
  const std::string port_text = absl::StrCat(host_port->port);
  if (int error = ::getaddrinfo(host_port->host.c_str(), port_text.c_str(), &hints, &resolved);
      error != 0) {
    return absl::InvalidArgumentError(absl::StrCat("listen address '", address,
                                                   "': cannot resolve '", host_port->host,
                                                   "': ", ::gai_strerror(error)));
  }
  bool has_ipv4 = false;
  for (const addrinfo* entry = resolved; entry != nullptr; entry = entry->ai_next) {
    has_ipv4 |= entry->ai_family == AF_INET;
  }
  BoundListenAddress bound;
  uint16_t port = static_cast<uint16_t>(host_port->port);
  absl::Status first_error = absl::OkStatus();
  for (const addrinfo* entry = resolved; entry != nullptr; entry = entry->ai_next) {
    ScopedFd fd(::socket(entry->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      // A family this host lacks (no IPv6 in a container) is skipped.
      if (first_error.ok()) first_error = ErrnoStatus(errno, absl::StrCat("socket(", address, ")"));
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (entry->ai_family == AF_INET6) {
      // "[::]:port" alone serves IPv4 too, as gRPC's listener did; beside an
      // IPv4 address of the same host it must not, or the two would clash.
      const int v6_only = has_ipv4 || !IsIpv6Any(entry->ai_addr) ? 1 : 0;
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &v6_only, sizeof(v6_only));
    }
    sockaddr_storage target{};
    std::memcpy(&target, entry->ai_addr, entry->ai_addrlen);
    SetPort(reinterpret_cast<sockaddr*>(&target), port);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&target), entry->ai_addrlen) != 0) {
      const int error = errno;
      if (error == EADDRINUSE) {
        ::freeaddrinfo(resolved);
        return absl::UnavailableError(absl::StrCat(
            "listen address '", address, "' is in use", port == 0 ? "" : " (port taken)",
            bound.sockets.empty() ? "" : absl::StrCat(" on port ", port)));
      }
      if (first_error.ok()) first_error = ErrnoStatus(error, absl::StrCat("bind(", address, ")"));
      continue;
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      const int error = errno;
      ::freeaddrinfo(resolved);
      return ErrnoStatus(error, absl::StrCat("listen(", address, ")"));
    }
    if (port == 0) {
      sockaddr_storage local{};
      socklen_t length = sizeof(local);
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length);
      port = PortOf(local);
    }
    bound.sockets.push_back(std::move(fd));
  }
  ::freeaddrinfo(resolved);
  if (bound.sockets.empty()) {
    return absl::UnavailableError(
        absl::StrCat("could not bind listen address '", address, "': ", first_error.message()));
  }
  bound.address = absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
  return bound;
}

}  // namespace

SocketFileOwner::SocketFileOwner(std::string path) : path_(std::move(path)) {
  struct stat file {};
  if (::lstat(path_.c_str(), &file) == 0) {
    device_ = file.st_dev;
    inode_ = file.st_ino;
  } else {
    path_.clear();
  }
}

SocketFileOwner& SocketFileOwner::operator=(SocketFileOwner&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, std::string());
    device_ = other.device_;
    inode_ = other.inode_;
  }
  return *this;
}

void SocketFileOwner::Remove() {
  if (path_.empty()) return;
  struct stat file {};
  if (::lstat(path_.c_str(), &file) == 0 && file.st_dev == device_ && file.st_ino == inode_) {
    ::unlink(path_.c_str());
  }
  path_.clear();
}

absl::Status ValidateListenAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return UnixPathOf(address).status();
  return SplitHostPort(address).status();
}

absl::StatusOr<BoundListenAddress> BindListenAddress(const std::string& address) {
  if (!absl::StartsWith(address, "unix:")) return BindTcp(address);
  absl::StatusOr<std::string> path = UnixPathOf(address);
  if (!path.ok()) return path.status();
  absl::StatusOr<ScopedFd> socket = ListenUnix(*path, SOCK_STREAM, 0660, SOMAXCONN);
  if (!socket.ok()) {
    if (absl::IsAlreadyExists(socket.status())) {
      return absl::UnavailableError(
          absl::StrCat("listen address '", address, "' is in use: ", socket.status().message()));
    }
    return socket.status();
  }
  BoundListenAddress bound;
  bound.address = address;
  bound.is_unix = true;
  bound.sockets.push_back(std::move(*socket));
  bound.unix_file = SocketFileOwner(*path);
  return bound;
}

}  // namespace tensord
