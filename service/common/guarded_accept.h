// accept4() that never leaves a listener stuck when the process is out of
// fds. A level-triggered listener whose accept fails with EMFILE stays
// readable, so its loop either spins or (gRPC's own listener) gives up for
// good. Here one spare fd is kept open: on EMFILE it is closed, the waiting
// connection is accepted into the freed slot and closed at once (the client
// sees a prompt reset, not a hang), and the spare is reopened. The backlog
// drains, and the first connection after fds free up is accepted normally.
//
// The spare alone loses races: gRPC's threads also want fds at the limit
// and may take the slot before the spare is reopened. So a connection is
// also refused while fewer than a reserve of fds (1/64 of RLIMIT_NOFILE, at
// least 8) stay free: the kernel hands out the lowest free fd, so an
// accepted fd numbered within the reserve of the limit means the table is
// that full. Connections then never take the last fds, and EMFILE at
// accept is left to fds taken by tensors and gRPC itself.
#ifndef TENSORD_SERVICE_COMMON_GUARDED_ACCEPT_H_
#define TENSORD_SERVICE_COMMON_GUARDED_ACCEPT_H_

#include "absl/strings/string_view.h"
#include "service/common/scoped_fd.h"

namespace tensord {

// Not thread-safe: one per accept loop.
class GuardedAccept {
 public:
  GuardedAccept();

  enum class Outcome {
    kAccepted,          // `connection` is the new connection
    kNoneWaiting,       // EAGAIN: the backlog is empty
    kDroppedAtFdLimit,  // out of fds, or within the reserve: one connection was closed
    kRetryLater,        // out of fds and no spare: stop polling briefly
    kTransientError,    // ECONNABORTED, EINTR, ...: try the next one
  };
  struct Result {
    Outcome outcome;
    ScopedFd connection;
    int error = 0;  // errno of a failure
  };

  // One accept4(SOCK_CLOEXEC | SOCK_NONBLOCK) on a non-blocking listener.
  // Running out of fds is noted in FdExhaustionLog() as `accept(<where>)`.
  Result Accept(int listener_fd, absl::string_view where = "listener");

  // Reopens the spare fd if an earlier drop could not (Accept also tries,
  // each time it meets EMFILE); call periodically.
  void RestoreSpare();
  bool has_spare() const { return spare_.valid(); }

 private:
  ScopedFd spare_;
  // Accepted fds numbered at or above this are closed (see the reserve).
  int reserve_floor_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_GUARDED_ACCEPT_H_
