#include "service/common/guarded_accept.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/episode_log.h"
#include "service/common/errno_status.h"

namespace tensord {
namespace {

ScopedFd OpenSpare() { return ScopedFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

int AcceptOne(int listener_fd) {
  return ::accept4(listener_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

}  // namespace

GuardedAccept::GuardedAccept() : spare_(OpenSpare()) {}

void GuardedAccept::RestoreSpare() {
  if (!spare_.valid()) spare_ = OpenSpare();
}

GuardedAccept::Result GuardedAccept::Accept(int listener_fd, absl::string_view where) {
  ScopedFd connection(AcceptOne(listener_fd));
  if (connection.valid()) return {Outcome::kAccepted, std::move(connection)};
  const int error = errno;
  if (error == EAGAIN || error == EWOULDBLOCK) return {Outcome::kNoneWaiting, {}, error};
  if (error != EMFILE && error != ENFILE) return {Outcome::kTransientError, {}, error};
  const std::string place = absl::StrCat("accept(", where, ")");
  if (!spare_.valid()) {
    FdExhaustionLog().Note(place, ErrnoStatus(error, "no spare fd; listener rests").message(),
                           absl::Now());
    return {Outcome::kRetryLater, {}, error};
  }
  FdExhaustionLog().Note(place, ErrnoStatus(error, "connection closed unserved").message(),
                         absl::Now());
  spare_.Reset();
  ScopedFd dropped(AcceptOne(listener_fd));
  const int drop_error = dropped.valid() ? 0 : errno;
  dropped.Reset();
  spare_ = OpenSpare();
  if (drop_error == 0) return {Outcome::kDroppedAtFdLimit, {}, error};
  if (drop_error == EAGAIN || drop_error == EWOULDBLOCK) return {Outcome::kNoneWaiting, {}, error};
  return {Outcome::kRetryLater, {}, drop_error};
}

}  // namespace tensord
