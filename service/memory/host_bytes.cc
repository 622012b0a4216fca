#include "service/memory/host_bytes.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"

namespace tensord {

absl::StatusOr<uint64_t> HostBytes::CheckWrite(bool sealed, uint64_t size, uint64_t offset,
                                               std::span<const std::span<const uint8_t>> pieces) {
  uint64_t total = 0;
  for (std::span<const uint8_t> piece : pieces) total += piece.size();
  TENSORD_RETURN_IF_ERROR(CheckWrite(sealed, size, offset, total));
  return total;
}

absl::Status HostBytes::CheckWrite(bool sealed, uint64_t size, uint64_t offset, uint64_t length) {
  if (sealed) return absl::FailedPreconditionError("write into a sealed buffer");
  if (offset > size || length > size - offset) {
    return absl::OutOfRangeError(absl::StrCat("write of ", length, " bytes at offset ", offset,
                                              " leaves a buffer of ", size, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status HostBytes::PreadInto(int fd, uint64_t file_offset, uint8_t* target, uint64_t length) {
  uint64_t done = 0;
  while (done < length) {
    const ssize_t got =
        ::pread(fd, target + done, length - done, static_cast<off_t>(file_offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return ErrnoStatus(errno, absl::StrCat("pread of ", length, " bytes at offset ", file_offset,
                                             " into a tensor's bytes"));
    }
    if (got == 0) {
      return absl::InvalidArgumentError(absl::StrCat("the file ends at offset ", file_offset + done,
                                                     ", inside the ", length,
                                                     " bytes to read at offset ", file_offset));
    }
    done += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace tensord
