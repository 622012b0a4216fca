#include "service/memory/future_write_seal.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"

namespace tensord {

absl::StatusOr<SealedMappings> SealKeepingOneWriter(int fd, uint64_t bytes,
                                                    absl::string_view what) {
  // Before the seal: after it no new writable mapping can be made.
  void* writable = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (writable == MAP_FAILED) {
    return MappingErrnoStatus(errno, absl::StrCat("mmap(", what, ", ", bytes, ") writable"));
  }
  constexpr int kSeals = F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (::fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    const int error = errno;
    ::munmap(writable, bytes);
    return ErrnoStatus(error, absl::StrCat("fcntl(", what, ", F_ADD_SEALS)"));
  }
  void* readable = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (readable == MAP_FAILED) {
    const int error = errno;
    ::munmap(writable, bytes);
    return MappingErrnoStatus(error, absl::StrCat("mmap(", what, ", ", bytes, ") read-only"));
  }
  return SealedMappings{static_cast<uint8_t*>(writable), static_cast<const uint8_t*>(readable)};
}

}  // namespace tensord
