// Turns an errno value into the canonical absl::Status for it.
#ifndef TENSORD_SERVICE_COMMON_ERRNO_STATUS_H_
#define TENSORD_SERVICE_COMMON_ERRNO_STATUS_H_

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace tensord {

// `what` names the failed call and its subject, e.g. "memfd_create(w1)".
// EMFILE and ENFILE become RESOURCE_EXHAUSTED naming the limit reached and
// its value ("RLIMIT_NOFILE = 1024 fds"), marked so IsFdExhaustion() finds
// them.
absl::Status ErrnoStatus(int error_number, absl::string_view what);

// For mmap(): ENOMEM also names vm.max_map_count, the other limit it means.
absl::Status MappingErrnoStatus(int error_number, absl::string_view what);

// OK when `fd`, just made for tensor memory, lies below TensorFdCeiling().
// Otherwise RESOURCE_EXHAUSTED, marked as fd exhaustion, naming the limit
// and the fds kept for connections; the caller closes `fd`.
absl::Status CheckTensorFd(int fd, absl::string_view what);

// True for the status of a call that failed because the process (EMFILE) or
// the system (ENFILE) ran out of file descriptors.
bool IsFdExhaustion(const absl::Status& status);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_ERRNO_STATUS_H_
