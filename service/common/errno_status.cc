#include "absl/strings/string_view.h"
#include "service/common/errno_status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tensord {

absl::Status ErrnoStatus(int error_number, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", std::strerror(error_number));
  switch (error_number) {
    case ENOENT: return absl::NotFoundError(message);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(message);
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE: return absl::ResourceExhaustedError(message);
    case EINVAL:
    case ENAMETOOLONG:
    case EISDIR:
    case ENOTDIR: return absl::InvalidArgumentError(message);
    case EEXIST: return absl::AlreadyExistsError(message);
    case EAGAIN:
    case EINTR:
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE: return absl::UnavailableError(message);
    default: return absl::InternalError(message);
  }
}

}  // namespace tensord
