#include "service/common/unix_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"

namespace tensord {
namespace {

absl::StatusOr<sockaddr_un> AddressOf(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path '", path, "' must be 1..",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

}  // namespace

absl::StatusOr<ScopedFd> ListenUnix(const std::string& path, int type, mode_t mode, int backlog) {
  absl::StatusOr<sockaddr_un> address = AddressOf(path);
  if (!address.ok()) return address.status();
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      return absl::AlreadyExistsError(absl::StrCat("'", path, "' exists and is not a socket"));
    }
    // A live server answers connect(); only a dead one's socket is replaced.
    absl::StatusOr<ScopedFd> probe = ConnectUnix(path, type);
    if (probe.ok()) {
      return absl::AlreadyExistsError(absl::StrCat("another server is listening on '", path, "'"));
    }
    ::unlink(path.c_str());
  }
  ScopedFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "socket(AF_UNIX)");
  // Bind under a restrictive umask so the socket is never briefly open to all.
  mode_t old_mask = ::umask(0777 & ~mode);
  int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address));
  int bind_errno = errno;
  ::umask(old_mask);
  if (bound != 0) return ErrnoStatus(bind_errno, absl::StrCat("bind(", path, ")"));
  if (::chmod(path.c_str(), mode) != 0)
    return ErrnoStatus(errno, absl::StrCat("chmod(", path, ")"));
  if (::listen(fd.get(), backlog) != 0) {
    return ErrnoStatus(errno, absl::StrCat("listen(", path, ")"));
  }
  return fd;
}

absl::StatusOr<ScopedFd> ConnectUnix(const std::string& path, int type) {
  absl::StatusOr<sockaddr_un> address = AddressOf(path);
  if (!address.ok()) return address.status();
  ScopedFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "socket(AF_UNIX)");
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("connect(", path, ")"));
  }
  return fd;
}

absl::StatusOr<ScopedFd> ListenSeqpacket(const std::string& path, mode_t mode) {
  return ListenUnix(path, SOCK_SEQPACKET, mode, SOMAXCONN);
}

absl::StatusOr<ScopedFd> ConnectSeqpacket(const std::string& path) {
  return ConnectUnix(path, SOCK_SEQPACKET);
}

absl::StatusOr<PeerCredentials> GetPeerCredentials(int socket_fd) {
  ucred credentials{};
  socklen_t size = sizeof(credentials);
  if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
    return ErrnoStatus(errno, "getsockopt(SO_PEERCRED)");
  }
  return PeerCredentials{credentials.pid, credentials.uid, credentials.gid};
}

absl::Status SendPacket(int socket_fd, absl::string_view bytes, int fd_to_pass) {
  if (fd_to_pass < 0) return SendPacket(socket_fd, bytes, std::span<const int>());
  return SendPacket(socket_fd, bytes, std::span<const int>(&fd_to_pass, 1));
}

absl::Status SendPacket(int socket_fd, absl::string_view bytes, std::span<const int> fds) {
  if (fds.size() > kMaxFdsPerPacket) {
    return absl::InvalidArgumentError(
        absl::StrCat("packet of ", fds.size(), " fds; the limit is ", kMaxFdsPerPacket));
  }
  iovec io{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerPacket)] = {};
  if (!fds.empty()) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  while (true) {
    ssize_t sent = ::sendmsg(socket_fd, &message, MSG_NOSIGNAL);
    if (sent >= 0) return absl::OkStatus();
    if (errno != EINTR) return ErrnoStatus(errno, "sendmsg");
  }
}

absl::StatusOr<ReceivedPacket> ReceivePacket(int socket_fd, size_t max_bytes, size_t max_fds) {
  // The next packet's length first (MSG_TRUNC reports it whole), so the
  // buffer is what the packet needs, not max_bytes zero-filled per call.
  ssize_t length;
  do {
    length = ::recv(socket_fd, nullptr, 0, MSG_PEEK | MSG_TRUNC);
  } while (length < 0 && errno == EINTR);
  if (length < 0) return ErrnoStatus(errno, "recv");
  ReceivedPacket packet;
  // One byte more than allowed, so that an oversized packet still shows as
  // truncated below.
  packet.bytes.resize(std::min(static_cast<size_t>(length), max_bytes + 1));
  iovec io{packet.bytes.data(), packet.bytes.size()};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  // Room for more fds than allowed so that extra ones are received (and
  // closed) rather than left to the kernel's truncation.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kMaxFdsPerPacket + 8))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t received;
  do {
    received = ::recvmsg(socket_fd, &message, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0) return ErrnoStatus(errno, "recvmsg");
  size_t fd_count = 0;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if (fd_count == 0) {
        packet.fd.Reset(fd);
      } else if (fd_count < max_fds) {
        packet.more_fds.emplace_back(fd);
      } else {
        ::close(fd);
      }
      ++fd_count;
    }
  }
  if (received == 0 && fd_count == 0)
    return absl::UnavailableError("handoff socket closed by the peer");
  if ((message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || fd_count > max_fds ||
      static_cast<size_t>(received) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("handoff packet truncated or carrying ",
                                                   fd_count, " fds; the limit is ", max_bytes,
                                                   " bytes and ", max_fds, " fd(s)"));
  }
  packet.bytes.resize(static_cast<size_t>(received));
  return packet;
}

}  // namespace tensord
