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

struct Allocation {
  ScopedFd fd;
  uint8_t* data = nullptr;
  uint64_t mapping_size = 0;
};

absl::StatusOr<Allocation> AllocateMemfd(const std::string& name, uint64_t size, bool huge) {
  Allocation allocation;
  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB : 0u);
  allocation.fd.Reset(::memfd_create(name.c_str(), flags));
  if (!allocation.fd.valid()) return ErrnoStatus(errno, absl::StrCat("memfd_create(", name, ")"));
  allocation.mapping_size = huge ? (size + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes : size;
  if (size == 0) {
    allocation.data = EmptyData();
    return allocation;
  }
  if (::ftruncate(allocation.fd.get(), static_cast<off_t>(allocation.mapping_size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("ftruncate(", name, ", ", allocation.mapping_size, ")"));
  }
  // For hugetlbfs this reserves the pages, so a short pool fails here rather
  // than with SIGBUS on first touch.
  void* data = ::mmap(nullptr, allocation.mapping_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      allocation.fd.get(), 0);
  if (data == MAP_FAILED) {
    return ErrnoStatus(errno, absl::StrCat("mmap(", name, ", ", allocation.mapping_size, ")"));
  }
  allocation.data = static_cast<uint8_t*>(data);
  // Fault every page in now, in one call: far cheaper than one fault per
  // 4 KiB page while a put copies in (it was most of the copy's cost).
  // Best effort: older kernels lack MADV_POPULATE_WRITE.
  ::madvise(data, allocation.mapping_size, MADV_POPULATE_WRITE);
  return allocation;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostBuffer>> HostBuffer::Create(uint64_t size,
                                                               absl::string_view debug_name,
                                                               PagePolicy policy) {
  std::string name = absl::StrCat("tensord:", debug_name.substr(0, 200));
  if (size > static_cast<uint64_t>(INT64_MAX) - kHugePageBytes) {
    return absl::InvalidArgumentError(absl::StrCat("buffer size ", size, " exceeds off_t"));
  }
  absl::StatusOr<Allocation> allocation;
  bool huge = policy == PagePolicy::kHugeWhenAvailable && size > 0;
  if (huge) {
    allocation = AllocateMemfd(name, size, /*huge=*/true);
    huge = allocation.ok();
  }
  if (!huge) allocation = AllocateMemfd(name, size, /*huge=*/false);
  if (!allocation.ok()) return allocation.status();
  return std::unique_ptr<HostBuffer>(new HostBuffer(std::move(allocation->fd), allocation->data,
                                                    size, allocation->mapping_size, huge));
}

HostBuffer::~HostBuffer() { Unmap(); }

void HostBuffer::Unmap() {
  if (data_ != EmptyData() && data_ != nullptr) ::munmap(data_, mapping_size_);
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
  if (static_cast<uint64_t>(status.st_size) != (size_ == 0 ? 0 : mapping_size_)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer was resized to ", status.st_size, " bytes; it must stay ", mapping_size_, " bytes"));
  }
  if (size_ > 0) {
    void* data = ::mmap(nullptr, mapping_size_, PROT_READ, MAP_SHARED, fd_.get(), 0);
    if (data == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap read-only ", mapping_size_));
    data_ = static_cast<uint8_t*>(data);
  }
  sealed_ = true;
  return absl::OkStatus();
}

}  // namespace tensord
