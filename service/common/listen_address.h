// Listen addresses for the gRPC server, bound by tensord itself so that it
// owns the accept loop (transport/connection_listener): "host:port",
// "[v6]:port" or "unix:PATH" / "unix:///PATH".
#ifndef TENSORD_SERVICE_COMMON_LISTEN_ADDRESS_H_
#define TENSORD_SERVICE_COMMON_LISTEN_ADDRESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/common/scoped_fd.h"

namespace tensord {

// INVALID_ARGUMENT naming `address` unless it is host:port (port 0..65535)
// or unix:PATH.
absl::Status ValidateListenAddress(const std::string& address);

// Removes a Unix socket's file when destroyed, but only while the file is
// still the one bound (a successor may have replaced it since). Move-only.
class SocketFileOwner {
 public:
  SocketFileOwner() = default;
  // Records the identity of the file at `path` now.
  explicit SocketFileOwner(std::string path);
  SocketFileOwner(SocketFileOwner&& other) noexcept { *this = std::move(other); }
  SocketFileOwner& operator=(SocketFileOwner&& other) noexcept;
  ~SocketFileOwner() { Remove(); }
  const std::string& path() const { return path_; }

 private:
  void Remove();
  std::string path_;
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

struct BoundListenAddress {
  // As given, with a chosen port filled in: "127.0.0.1:43521",
  // "unix:/run/tensord.sock".
  std::string address;
  bool is_unix = false;
  // Non-blocking listening sockets: one for a Unix path; one per address
  // the host resolves to ("localhost" -> ::1 and 127.0.0.1), on one port.
  std::vector<ScopedFd> sockets;
  // Declared after `sockets`, so the file goes before the socket closes.
  SocketFileOwner unix_file;
};

// Binds and listens. A Unix socket file gets mode 0660 (owner and group),
// and replaces only a dead server's socket. UNAVAILABLE when the address is
// in use or cannot be bound, INVALID_ARGUMENT when the host does not resolve.
absl::StatusOr<BoundListenAddress> BindListenAddress(const std::string& address);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_LISTEN_ADDRESS_H_
