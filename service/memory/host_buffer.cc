#include "absl/strings/string_view.h"
#include "service/memory/host_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"

namespace tensord {
namespace {

// Zero-size tensors still need a valid, aligned, non-NULL data pointer.
alignas(256) const uint8_t kEmptyBytes[256] = {};

uint8_t* EmptyData() { return const_cast<uint8_t*>(kEmptyBytes); }

}  // namespace

absl::StatusOr<std::unique_ptr<HostBuffer>> HostBuffer::Create(uint64_t size,
                                                               absl::string_view debug_name) {
  std::string name = absl::StrCat("tensord:", debug_name.substr(0, 200));
  ScopedFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("memfd_create(", name, ")"));
  if (size == 0) return std::unique_ptr<HostBuffer>(new HostBuffer(std::move(fd), EmptyData(), 0));
  if (size > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("buffer size ", size, " exceeds off_t"));
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("ftruncate(", name, ", ", size, ")"));
  }
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap(", name, ", ", size, ")"));
  return std::unique_ptr<HostBuffer>(
      new HostBuffer(std::move(fd), static_cast<uint8_t*>(data), size));
}

HostBuffer::~HostBuffer() { Unmap(); }

void HostBuffer::Unmap() {
  if (data_ != EmptyData() && data_ != nullptr) ::munmap(data_, size_);
  // Until a successful Seal() maps them again there are no bytes to touch.
  data_ = size_ == 0 ? EmptyData() : nullptr;
}

absl::Status HostBuffer::Seal() {
  if (sealed_) return absl::OkStatus();
  // F_SEAL_WRITE fails with EBUSY while a writable shared mapping exists.
  Unmap();
  constexpr int kSeals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (::fcntl(fd_.get(), F_ADD_SEALS, kSeals) != 0) {
    if (errno == EBUSY) {
      return absl::FailedPreconditionError(
          "cannot seal: a process still maps the buffer writable; unmap it before sealing");
    }
    return ErrnoStatus(errno, "fcntl(F_ADD_SEALS)");
  }
  // A producer holding the fd may have resized it before the seals landed.
  struct stat status{};
  if (::fstat(fd_.get(), &status) != 0) return ErrnoStatus(errno, "fstat(memfd)");
  if (static_cast<uint64_t>(status.st_size) != size_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer was resized to ", status.st_size, " bytes; it must stay ", size_, " bytes"));
  }
  if (size_ > 0) {
    void* data = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_.get(), 0);
    if (data == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap read-only ", size_));
    data_ = static_cast<uint8_t*>(data);
  }
  sealed_ = true;
  return absl::OkStatus();
}

}  // namespace tensord
