// Where the local handoff socket goes when --handoff-socket is left at
// "auto": a per-user runtime directory, so a client on the same host gets
// zero-copy with no flags (it learns the path from GetServerInfo).
#ifndef TENSORD_SERVER_HANDOFF_SOCKET_PATH_H_
#define TENSORD_SERVER_HANDOFF_SOCKET_PATH_H_

#include <string>

#include "absl/status/statusor.h"

namespace tensord {

struct HandoffSocketPath {
  std::string path;
  // A directory made only for this server (the last fallback below), removed
  // by the caller once the socket is gone; empty otherwise.
  std::string private_directory;
};

// $XDG_RUNTIME_DIR/tensord/handoff-<pid>.sock when XDG_RUNTIME_DIR names a
// directory this user owns and that path fits a Unix socket address (107
// bytes); otherwise /tmp/tensord-<uid>/handoff-<pid>.sock,
// the directory made 0700 and used only when it is a real directory owned
// by this user with no access for others; otherwise a fresh
// /tmp/tensord-<uid>-XXXXXX. The pid keeps two servers of one user apart.
// Socket files of servers that died without cleaning up (their pid is gone)
// are removed from the chosen directory.
absl::StatusOr<HandoffSocketPath> DefaultHandoffSocketPath();

}  // namespace tensord

#endif  // TENSORD_SERVER_HANDOFF_SOCKET_PATH_H_
