#include "service/memory/host_buffer.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"
#include "service/memory/future_write_seal.h"

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
  TENSORD_RETURN_IF_ERROR(
      CheckTensorFd(allocation.fd.get(), absl::StrCat("memfd_create(", name, ")")));
  allocation.mapping_size =
      huge ? (size + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes : size;
  if (size == 0) {
    allocation.data = EmptyData();
    return allocation;
  }
  if (::ftruncate(allocation.fd.get(), static_cast<off_t>(allocation.mapping_size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("ftruncate(", name, ", ", allocation.mapping_size, ")"));
  }
  if (!huge) return allocation;  // filled with pwritev, mapped at Seal
  // hugetlbfs has no write(2): map it writable. This also reserves the
  // pages, so a short pool fails here rather than with SIGBUS on first touch.
  void* data = ::mmap(nullptr, allocation.mapping_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      allocation.fd.get(), 0);
  if (data == MAP_FAILED) {
    return MappingErrnoStatus(errno,
                              absl::StrCat("mmap(", name, ", ", allocation.mapping_size, ")"));
  }
  allocation.data = static_cast<uint8_t*>(data);
  return allocation;
}

}  // namespace

SpareMemfd::SpareMemfd(SpareMemfd&& other) noexcept
    : fd_(std::move(other.fd_)),
      writable_(std::exchange(other.writable_, nullptr)),
      readable_(std::exchange(other.readable_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      populated_(other.populated_) {}

SpareMemfd& SpareMemfd::operator=(SpareMemfd&& other) noexcept {
  if (this != &other) {
    Unmap();
    fd_ = std::move(other.fd_);
    writable_ = std::exchange(other.writable_, nullptr);
    readable_ = std::exchange(other.readable_, nullptr);
    size_ = std::exchange(other.size_, 0);
    populated_ = other.populated_;
  }
  return *this;
}

SpareMemfd::~SpareMemfd() { Unmap(); }

void SpareMemfd::Unmap() {
  if (writable_ != nullptr) ::munmap(writable_, size_);
  if (readable_ != nullptr) ::munmap(const_cast<uint8_t*>(readable_), size_);
  writable_ = nullptr;
  readable_ = nullptr;
}

absl::StatusOr<std::unique_ptr<HostBuffer>> HostBuffer::Create(uint64_t size,
                                                               absl::string_view debug_name,
                                                               PagePolicy policy,
                                                               RecycleMemfd recycle) {
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
  std::unique_ptr<HostBuffer> buffer(new HostBuffer(std::move(allocation->fd), allocation->data,
                                                    size, allocation->mapping_size, huge));
  if (!huge && size > 0) buffer->recycle_ = std::move(recycle);
  return buffer;
}

absl::StatusOr<std::unique_ptr<HostBuffer>> HostBuffer::Reuse(SpareMemfd spare,
                                                              RecycleMemfd recycle) {
  // Allowed despite F_SEAL_FUTURE_WRITE: the mapping predates the seal.
  if (::mprotect(spare.writable_, spare.size_, PROT_READ | PROT_WRITE) != 0) {
    return ErrnoStatus(errno, absl::StrCat("mprotect(spare memfd, ", spare.size_, ") writable"));
  }
  std::unique_ptr<HostBuffer> buffer(new HostBuffer(
      std::move(spare.fd_), spare.writable_, spare.size_, spare.size_, /*huge_pages=*/false));
  buffer->recycle_ = std::move(recycle);
  buffer->kept_writable_ = std::exchange(spare.writable_, nullptr);
  buffer->kept_readable_ = std::exchange(spare.readable_, nullptr);
  buffer->populated_ = spare.populated_;
#if defined(MADV_POPULATE_WRITE)
  // The writable mapping was made at the first seal without page tables:
  // filling them in one call costs far less than a fault per page in the
  // put's copy. Once filled they stay for every later use.
  if (!buffer->populated_) {
    buffer->populated_ = ::madvise(buffer->kept_writable_, buffer->size_, MADV_POPULATE_WRITE) == 0;
  }
#endif
  return buffer;
}

HostBuffer::HostBuffer(ScopedFd fd, uint8_t* writable, uint64_t size, uint64_t mapping_size,
                       bool huge_pages)
    : fd_(std::move(fd)),
      data_(size == 0 ? EmptyData() : nullptr),
      writable_(size == 0 ? nullptr : writable),
      size_(size),
      mapping_size_(mapping_size),
      huge_pages_(huge_pages) {}

HostBuffer::~HostBuffer() {
  if (!reusable()) {
    Unmap();
    return;
  }
  SpareMemfd spare(std::move(fd_), kept_writable_, kept_readable_, size_, populated_);
  if (recycle_) recycle_(std::move(spare));  // else `spare` frees it here
}

void HostBuffer::Unmap() {
  if (writable_ != nullptr) ::munmap(writable_, mapping_size_);
  writable_ = nullptr;
  if (data_ != nullptr && data_ != EmptyData()) {
    ::munmap(const_cast<uint8_t*>(data_), mapping_size_);
  }
  data_ = size_ == 0 ? EmptyData() : nullptr;
}

absl::Status HostBuffer::AllocatePages() {
  if (sealed_) return absl::FailedPreconditionError("allocate pages of a sealed buffer");
  // hugetlbfs pages were reserved by the writable mapping at Create; a
  // spare's pages exist already.
  if (size_ == 0 || huge_pages_ || reusable()) return absl::OkStatus();
  if (::fallocate(fd_.get(), 0, 0, static_cast<off_t>(mapping_size_)) != 0) {
    if (errno == ENOSPC || errno == ENOMEM) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no memory for ", mapping_size_,
                       " bytes of tensor pages (fallocate: ", std::strerror(errno), ")"));
    }
    return ErrnoStatus(errno, absl::StrCat("fallocate(memfd, ", mapping_size_, ")"));
  }
  return absl::OkStatus();
}

absl::Status HostBuffer::ReadFrom(int fd, uint64_t file_offset, uint64_t offset, uint64_t length) {
  if (writable_ == nullptr) return HostBytes::ReadFrom(fd, file_offset, offset, length);
  TENSORD_RETURN_IF_ERROR(CheckWrite(sealed_, size_, offset, length));
  return PreadInto(fd, file_offset, writable_ + offset, length);
}

absl::Status HostBuffer::Write(uint64_t offset, std::span<const std::span<const uint8_t>> pieces) {
  absl::StatusOr<uint64_t> fits = CheckWrite(sealed_, size_, offset, pieces);
  if (!fits.ok()) return fits.status();
  const uint64_t total = *fits;
  if (writable_ != nullptr) {
    for (std::span<const uint8_t> piece : pieces) {
      if (piece.empty()) continue;
      std::memcpy(writable_ + offset, piece.data(), piece.size());
      offset += piece.size();
    }
    return absl::OkStatus();
  }
  // Batches of up to kBatch pieces on the stack (no allocation per chunk on
  // the put path); a short write resumes mid-piece.
  constexpr size_t kBatch = 64;
  static_assert(kBatch <= IOV_MAX);
  std::array<iovec, kBatch> iov;
  size_t next = 0;
  uint64_t skip = 0;  // bytes of pieces[next] already written
  while (next < pieces.size()) {
    size_t count = 0;
    for (size_t i = next; i < pieces.size() && count < kBatch; ++i) {
      const uint64_t already = i == next ? skip : 0;
      if (pieces[i].size() == already) continue;
      iov[count++] = {const_cast<uint8_t*>(pieces[i].data()) + already,
                      static_cast<size_t>(pieces[i].size() - already)};
    }
    if (count == 0) break;
    const ssize_t written =
        ::pwritev(fd_.get(), iov.data(), static_cast<int>(count), static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOSPC || errno == ENOMEM) {
        return absl::ResourceExhaustedError(
            absl::StrCat("no memory for ", total,
                         " bytes of tensor pages (pwritev: ", std::strerror(errno), ")"));
      }
      return ErrnoStatus(errno, absl::StrCat("pwritev(memfd, offset ", offset, ")"));
    }
    if (written == 0) return absl::InternalError("pwritev(memfd) wrote nothing");
    offset += static_cast<uint64_t>(written);
    uint64_t left = static_cast<uint64_t>(written);
    while (left > 0 && next < pieces.size()) {
      const uint64_t rest = pieces[next].size() - skip;
      if (left < rest) {
        skip += left;
        left = 0;
      } else {
        left -= rest;
        skip = 0;
        ++next;
      }
    }
    while (next < pieces.size() && pieces[next].size() == skip) {
      skip = 0;
      ++next;
    }
  }
  return absl::OkStatus();
}

absl::Status HostBuffer::Seal() {
  if (sealed_) return absl::OkStatus();
  if (reusable()) {  // a spare's seals are in place
    TENSORD_RETURN_IF_ERROR(ProtectKeptMapping());
    writable_ = nullptr;
    data_ = kept_readable_;
    sealed_ = true;
    return absl::OkStatus();
  }
  if (recycle_) return SealForReuse();
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
  struct stat status {};
  if (::fstat(fd_.get(), &status) != 0) return ErrnoStatus(errno, "fstat(memfd)");
  if (static_cast<uint64_t>(status.st_size) != (size_ == 0 ? 0 : mapping_size_)) {
    return absl::FailedPreconditionError(absl::StrCat("buffer was resized to ", status.st_size,
                                                      " bytes; it must stay ", mapping_size_,
                                                      " bytes"));
  }
  if (size_ > 0) {
    void* data = ::mmap(nullptr, mapping_size_, PROT_READ, MAP_SHARED, fd_.get(), 0);
    if (data == MAP_FAILED)
      return MappingErrnoStatus(errno, absl::StrCat("mmap read-only ", mapping_size_));
    data_ = static_cast<uint8_t*>(data);
  }
  sealed_ = true;
  return absl::OkStatus();
}

absl::Status HostBuffer::SealForReuse() {
  TENSORD_ASSIGN_OR_RETURN(const SealedMappings mappings,
                           SealKeepingOneWriter(fd_.get(), size_, "put memfd"));
  kept_writable_ = mappings.writable;  // the server's only way to write it again
  kept_readable_ = mappings.readable;
  TENSORD_RETURN_IF_ERROR(ProtectKeptMapping());
  data_ = kept_readable_;
  sealed_ = true;
  return absl::OkStatus();
}

absl::Status HostBuffer::ProtectKeptMapping() {
  if (::mprotect(kept_writable_, size_, PROT_READ) != 0) {
    return ErrnoStatus(errno, absl::StrCat("mprotect(put memfd, ", size_, ") read-only"));
  }
  return absl::OkStatus();
}

}  // namespace tensord
