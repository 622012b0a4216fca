#include "service/common/errno_status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "service/common/fd_limits.h"

namespace tensord {
namespace {

// Payload that marks a status as fd exhaustion; its value is the errno name.
constexpr absl::string_view kFdExhaustionPayload = "type.tensord.dev/fd_exhausted";

absl::Status FdExhaustion(int error_number, absl::string_view what) {
  std::string message =
      error_number == EMFILE
          ? absl::StrCat(what,
                         ": tensord reached its open-file limit (RLIMIT_NOFILE = ", OpenFileLimit(),
                         " fds); close connections or delete tensors, or raise the limit "
                         "(ulimit -n, LimitNOFILE=)")
          : absl::StrCat(what, ": the system reached its open-file limit (fs.file-max = ",
                         SystemOpenFileLimit(), " fds)");
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kFdExhaustionPayload, absl::Cord(error_number == EMFILE ? "EMFILE" : "ENFILE"));
  return status;
}

}  // namespace

absl::Status CheckTensorFd(int fd, absl::string_view what) {
  const uint64_t ceiling = TensorFdCeiling();
  if (ceiling == 0 || fd < 0 || static_cast<uint64_t>(fd) < ceiling) return absl::OkStatus();
  absl::Status status = absl::ResourceExhaustedError(absl::StrCat(
      what, ": tensor memory has used the fds it may (RLIMIT_NOFILE = ", OpenFileLimit(),
      " fds, of which the ", OpenFileLimit() - ceiling, " above ", ceiling,
      " are kept for connections: --max-connections plus "
      "--max-handoff-connections); delete tensors, or raise the limit (ulimit -n, LimitNOFILE=)"));
  status.SetPayload(kFdExhaustionPayload, absl::Cord("EMFILE"));
  return status;
}

absl::Status ErrnoStatus(int error_number, absl::string_view what) {
  if (error_number == EMFILE || error_number == ENFILE) return FdExhaustion(error_number, what);
  std::string message = absl::StrCat(what, ": ", std::strerror(error_number));
  switch (error_number) {
    case ENOENT: return absl::NotFoundError(message);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(message);
    case ENOMEM:
    case ENOSPC: return absl::ResourceExhaustedError(message);
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

absl::Status MappingErrnoStatus(int error_number, absl::string_view what) {
  if (error_number != ENOMEM) return ErrnoStatus(error_number, what);
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": out of memory or of mappings (vm.max_map_count = ", MappingLimit(),
                   " per process)"));
}

bool IsFdExhaustion(const absl::Status& status) {
  return status.GetPayload(kFdExhaustionPayload).has_value();
}

}  // namespace tensord
