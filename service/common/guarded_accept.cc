#include "service/common/guarded_accept.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/episode_log.h"
#include "service/common/errno_status.h"
#include "service/common/fd_limits.h"

namespace tensord {
namespace {

ScopedFd OpenSpare() { return ScopedFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

int AcceptOne(int listener_fd) {
  return ::accept4(listener_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

int ReserveFloor() {
  const uint64_t limit = std::min<uint64_t>(OpenFileLimit(), INT32_MAX);
  const uint64_t reserve = std::max<uint64_t>(8, limit / 64);
  return static_cast<int>(limit > reserve ? limit - reserve : 0);
}

}  // namespace

GuardedAccept::GuardedAccept() : spare_(OpenSpare()), reserve_floor_(ReserveFloor()) {}

void GuardedAccept::RestoreSpare() {
  if (!spare_.valid()) spare_ = OpenSpare();
}

GuardedAccept::Result GuardedAccept::Accept(int listener_fd, absl::string_view where) {
  ScopedFd connection(AcceptOne(listener_fd));
  if (connection.valid() && connection.get() >= reserve_floor_) {
    FdExhaustionLog().Note(
        absl::StrCat("accept(", where, ")"),
        absl::StrCat("connection closed unserved: fd ", connection.get(),
                     " is within the reserve kept below RLIMIT_NOFILE = ", OpenFileLimit()),
        absl::Now());
    return {Outcome::kDroppedAtFdLimit, {}, EMFILE};
  }
  if (connection.valid()) return {Outcome::kAccepted, std::move(connection)};
  const int error = errno;
  if (error == EAGAIN || error == EWOULDBLOCK) return {Outcome::kNoneWaiting, {}, error};
  if (error != EMFILE && error != ENFILE) return {Outcome::kTransientError, {}, error};
  const std::string place = absl::StrCat("accept(", where, ")");
  // Another thread may have taken the slot the spare was reopened into;
  // any fd freed since gives it back.
  RestoreSpare();
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
