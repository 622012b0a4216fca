// SOCK_SEQPACKET Unix sockets with file descriptors passed as SCM_RIGHTS:
// the carrier of local handoff. Every fd is owned by a ScopedFd.
#ifndef TENSORD_SERVICE_COMMON_UNIX_SOCKET_H_
#define TENSORD_SERVICE_COMMON_UNIX_SOCKET_H_

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/scoped_fd.h"

namespace tensord {

// Largest packet either side sends; a handoff message is far smaller.
inline constexpr size_t kMaxPacketBytes = 64 * 1024;

// Binds and listens on `path` (socket `type`: SOCK_STREAM, SOCK_SEQPACKET)
// with permissions `mode` (e.g. 0660); the listener is non-blocking. A stale
// socket file left by a dead server is replaced; any other file, or a live
// server's socket, is not (ALREADY_EXISTS).
absl::StatusOr<ScopedFd> ListenUnix(const std::string& path, int type, mode_t mode, int backlog);
// Connects a socket of `type` to the listener at `path`.
absl::StatusOr<ScopedFd> ConnectUnix(const std::string& path, int type);

// The handoff socket's flavour of the two above.
absl::StatusOr<ScopedFd> ListenSeqpacket(const std::string& path, mode_t mode);

// Connects to the listener at `path`.
absl::StatusOr<ScopedFd> ConnectSeqpacket(const std::string& path);

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
// SO_PEERCRED of a connected socket.
absl::StatusOr<PeerCredentials> GetPeerCredentials(int socket_fd);

// Most fds one packet carries (SCM_RIGHTS takes up to 253 per message).
inline constexpr size_t kMaxFdsPerPacket = 64;
// Largest packet of a batch answer: within the socket's default send
// buffer (net.core.wmem_default, 208 KiB), so one sendmsg always fits an
// empty socket.
inline constexpr size_t kMaxBatchPacketBytes = 160 * 1024;

// Sends one packet, with `fd_to_pass` as SCM_RIGHTS when >= 0.
absl::Status SendPacket(int socket_fd, absl::string_view bytes, int fd_to_pass = -1);
// Sends one packet with up to kMaxFdsPerPacket fds as SCM_RIGHTS.
absl::Status SendPacket(int socket_fd, absl::string_view bytes, std::span<const int> fds);

struct ReceivedPacket {
  std::string bytes;
  ScopedFd fd;                     // invalid when none came
  std::vector<ScopedFd> more_fds;  // the fds after the first, in order
};
// Receives one packet of up to `max_bytes` bytes and `max_fds` fds
// (blocking unless the socket is non-blocking). UNAVAILABLE with "closed"
// when the peer has gone; INVALID_ARGUMENT for a truncated packet or more
// fds than allowed (extra fds are closed).
absl::StatusOr<ReceivedPacket> ReceivePacket(int socket_fd, size_t max_bytes = kMaxPacketBytes,
                                             size_t max_fds = 1);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_UNIX_SOCKET_H_
