#include "service/registry/filling_version.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/mapped_file.h"

namespace tensord {
namespace {

// The pull's own memfd mapped read-only, through a read-only reopen of it
// (a shared mapping of the writable descriptor would keep the buffer from
// being sealed): the mapping keeps the pages alive after the buffer is
// sealed (remapped) or freed, so a chunk pointing into it stays valid
// until gRPC lets go of it. Arena slots are never passed on.
absl::StatusOr<std::shared_ptr<const MappedFile>> MapReadOnly(const HostBytes& bytes) {
  if (bytes.arena_id() != 0) {
    return absl::FailedPreconditionError("an arena slot is not mapped to be passed on");
  }
  return MappedFile::Open(absl::StrCat("/proc/self/fd/", bytes.fd()));
}

}  // namespace

absl::Status FillingVersion::Begin(const VersionDescription& description, const HostBytes& bytes) {
  std::shared_ptr<const MappedFile> mapped;
  if (description.total_bytes > kPassedOnAboveBytes) {
    // Without it the pull goes on; its readers wait for the whole copy.
    absl::StatusOr<std::shared_ptr<const MappedFile>> mapping = MapReadOnly(bytes);
    if (mapping.ok() && (*mapping)->bytes().size() >= description.total_bytes) {
      mapped = *std::move(mapping);
    }
  }
  std::vector<Wake> waiters;
  {
    MutexLock lock(&mu_);
    if (announced_ == nullptr) {
      announced_ = std::make_unique<TensorVersion>();
      static_cast<VersionDescription&>(*announced_) = description;
      announced_->version = 0;  // numbered when installed
    } else if (announced_->layout != description.layout ||
               announced_->total_bytes != description.total_bytes ||
               announced_->crc32c != description.crc32c) {
      return absl::DataLossError(
          absl::StrCat("another copy of '", description.name,
                       "' has another layout, size or CRC-32C than the one its readers were told"));
    }
    mapped_ = std::move(mapped);
    written_ = 0;
    waiters = ChangedLocked();
  }
  WakeAll(std::move(waiters));
  return absl::OkStatus();
}

void FillingVersion::Advance(uint64_t end) {
  std::vector<Wake> waiters;
  {
    MutexLock lock(&mu_);
    if (end <= written_) return;
    written_ = end;
    waiters = ChangedLocked();
  }
  WakeAll(std::move(waiters));
}

void FillingVersion::Abandon() {
  MutexLock lock(&mu_);
  if (mapped_ != nullptr && written_ > 0) abandoned_.emplace_back(std::move(mapped_), written_);
  mapped_.reset();
  written_ = 0;
}

void FillingVersion::Complete(std::shared_ptr<const TensorVersion> version) {
  std::vector<std::pair<std::shared_ptr<const MappedFile>, uint64_t>> abandoned;
  {
    MutexLock lock(&mu_);
    mapped_.reset();
    abandoned.swap(abandoned_);
  }
  // Their bytes no longer change: compared outside the lock.
  bool differed = false;
  for (const auto& [bytes, written] : abandoned) {
    const uint64_t size = std::min(written, version->total_bytes);
    differed = differed || version->buffer == nullptr ||
               std::memcmp(bytes->bytes().data(), version->buffer->data(), size) != 0;
  }
  std::vector<Wake> waiters;
  {
    MutexLock lock(&mu_);
    complete_ = std::move(version);
    abandoned_bytes_differed_ = differed;
    waiters = ChangedLocked();
  }
  WakeAll(std::move(waiters));
}

void FillingVersion::Fail(absl::Status status) {
  std::vector<Wake> waiters;
  {
    MutexLock lock(&mu_);
    mapped_.reset();
    if (!complete_) failed_ = std::move(status);
    waiters = ChangedLocked();
  }
  WakeAll(std::move(waiters));
}

FillingVersion::View FillingVersion::Look() const {
  MutexLock lock(&mu_);
  View view{.changes = changes_,
            .announced = announced_.get(),
            .complete = complete_,
            .abandoned_bytes_differed = abandoned_bytes_differed_,
            .failed = failed_};
  if (mapped_ != nullptr) {
    // The last byte waits for the check of the whole copy.
    view.readable = std::min(written_, announced_->total_bytes - 1);
  }
  return view;
}

bool FillingVersion::WaitPast(uint64_t changes, Wake& wake) {
  MutexLock lock(&mu_);
  if (changes != changes_ || complete_ || failed_.has_value()) return false;
  waiters_.push_back(std::move(wake));
  return true;
}

std::optional<FillingVersion::Borrowed> FillingVersion::Borrow(uint64_t offset,
                                                               uint64_t size) const {
  Borrowed borrowed;
  {
    MutexLock lock(&mu_);
    if (mapped_ == nullptr || offset + size > written_ ||
        offset + size >= announced_->total_bytes) {
      return std::nullopt;
    }
    borrowed = Borrowed{.data = reinterpret_cast<const uint8_t*>(mapped_->bytes().data()) + offset,
                        .hold = mapped_};
  }
#if defined(MADV_POPULATE_READ)
  // The pages in one call: the send would otherwise fault them in one at a
  // time. Best effort: a fault still maps what this leaves out.
  static const uintptr_t kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(borrowed.data) & ~(kPage - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(borrowed.data) + size;
  ::madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_READ);
#endif
  return borrowed;
}

std::vector<FillingVersion::Wake> FillingVersion::ChangedLocked() {
  ++changes_;
  return std::exchange(waiters_, {});
}

void FillingVersion::WakeAll(std::vector<Wake> waiters) {
  for (Wake& wake : waiters) std::move(wake)();
}

}  // namespace tensord
