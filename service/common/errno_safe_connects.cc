#include "service/common/errno_safe_connects.h"

#include <cerrno>

#include "absl/base/internal/cycleclock.h"

namespace tensord {

void MakeGrpcConnectsErrnoSafe() {
  // absl::Mutex's queue reads CycleClock::Frequency() when a second waiter
  // queues; the first read in a process measures it (opening sysfs files
  // that may not exist) and caches it. Reading it here does the measuring.
  static const bool measured = [] {
    const int saved_errno = errno;
    (void)absl::base_internal::CycleClock::Frequency();
    errno = saved_errno;
    return true;
  }();
  (void)measured;
}

}  // namespace tensord
