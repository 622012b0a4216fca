#include "service/memory/host_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"
#include "service/memory/future_write_seal.h"

namespace tensord {

absl::StatusOr<std::unique_ptr<HostArena>> HostArena::Create(uint64_t slot_bytes,
                                                             uint32_t slot_count,
                                                             absl::string_view debug_name) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (slot_bytes == 0 || slot_bytes % page != 0 || slot_count == 0 ||
      slot_bytes > (uint64_t{1} << 40) / slot_count) {
    return absl::InvalidArgumentError(absl::StrCat("arena of ", slot_count, " slots of ",
                                                   slot_bytes, " bytes (page size ", page, ")"));
  }
  const std::string name = absl::StrCat("tensord:", debug_name.substr(0, 200));
  ScopedFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("memfd_create(", name, ")"));
  TENSORD_RETURN_IF_ERROR(CheckTensorFd(fd.get(), absl::StrCat("memfd_create(", name, ")")));
  const uint64_t bytes = slot_bytes * slot_count;
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("ftruncate(", name, ", ", bytes, ")"));
  }
  // After this only the writable mapping can change a byte, for every
  // holder of the fd.
  TENSORD_ASSIGN_OR_RETURN(const SealedMappings mappings,
                           SealKeepingOneWriter(fd.get(), bytes, name));
  return std::unique_ptr<HostArena>(
      new HostArena(std::move(fd), mappings.writable, mappings.readable, slot_bytes, slot_count));
}

HostArena::~HostArena() {
  ::munmap(writable_, bytes());
  ::munmap(const_cast<uint8_t*>(readable_), bytes());
}

absl::Status HostArena::AllocateSlot(uint32_t slot) {
  if (slot >= slot_count_) {
    return absl::OutOfRangeError(absl::StrCat("slot ", slot, " of an arena of ", slot_count_));
  }
  // F_SEAL_FUTURE_WRITE forbids punching holes, not allocating within the
  // size.
  if (::fallocate(fd_.get(), 0, static_cast<off_t>(slot * slot_bytes_),
                  static_cast<off_t>(slot_bytes_)) != 0) {
    if (errno == ENOSPC || errno == ENOMEM) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no memory for ", slot_bytes_,
                       " bytes of tensor pages (fallocate: ", std::strerror(errno), ")"));
    }
    return ErrnoStatus(errno, absl::StrCat("fallocate(arena, ", slot_bytes_, " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace tensord
