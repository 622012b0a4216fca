// Turns an errno value into the canonical absl::Status for it.
#ifndef TENSORD_SERVICE_COMMON_ERRNO_STATUS_H_
#define TENSORD_SERVICE_COMMON_ERRNO_STATUS_H_

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace tensord {

// `what` names the failed call and its subject, e.g. "memfd_create(w1)".
absl::Status ErrnoStatus(int error_number, absl::string_view what);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_ERRNO_STATUS_H_
