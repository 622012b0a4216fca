#include "client/src/receive_buffer_pool.h"

#include <sys/mman.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/mutex.h"

namespace tensord {

std::shared_ptr<ReceiveBufferPool> ReceiveBufferPool::Create(uint64_t max_bytes,
                                                             absl::Duration idle_release) {
  return std::shared_ptr<ReceiveBufferPool>(new ReceiveBufferPool(max_bytes, idle_release));
}

ReceiveBufferPool::~ReceiveBufferPool() {
  for (const auto& [capacity, idle] : idle_) ::munmap(idle.data, capacity);
}

absl::StatusOr<std::shared_ptr<HeapTensorMemory>> ReceiveBufferPool::Allocate(uint64_t size) {
  if (max_bytes_ == 0 || size < HeapTensorMemory::kMmapThreshold || size > max_bytes_) {
    return HeapTensorMemory::Allocate(size);
  }
  void* data = nullptr;
  uint64_t capacity = size;
  {
    MutexLock lock(&mutex_);
    DropStaleLocked(absl::Now());
    // The smallest idle buffer that holds `size` without wasting much.
    auto fit = idle_.lower_bound(size);
    if (fit != idle_.end() && fit->first <= size + size / 4 + HeapTensorMemory::kMmapThreshold) {
      capacity = fit->first;
      data = fit->second.data;
      idle_bytes_ -= capacity;
      idle_.erase(fit);
      ++reused_;
    }
  }
  if (data == nullptr) {
    data = HeapTensorMemory::Map(size);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot map ", size, " bytes"));
    }
  }
  return std::make_shared<HeapTensorMemory>(HeapTensorMemory::Key(), data, nullptr, size, capacity,
                                            /*mapped=*/true, shared_from_this());
}

void ReceiveBufferPool::Release(void* data, uint64_t capacity) {
  // The pages stay mapped, but the kernel may reclaim them under memory
  // pressure instead of swapping them out: their contents are not needed.
  ::madvise(data, capacity, MADV_FREE);
  std::vector<std::pair<void*, uint64_t>> unmap;
  {
    MutexLock lock(&mutex_);
    const absl::Time now = absl::Now();
    DropStaleLocked(now);
    idle_.emplace(capacity, Idle{.data = data, .since = now});
    idle_bytes_ += capacity;
    // Over the bound: the longest idle go first. The one just released is
    // what a repeated fetch needs next (a 1 GiB fetch after 256 MiB ones).
    while (idle_bytes_ > max_bytes_) {
      auto oldest = idle_.begin();
      for (auto it = idle_.begin(); it != idle_.end(); ++it) {
        if (it->second.since < oldest->second.since) oldest = it;
      }
      unmap.emplace_back(oldest->second.data, oldest->first);
      idle_bytes_ -= oldest->first;
      idle_.erase(oldest);
    }
  }
  for (const auto& [address, size] : unmap) ::munmap(address, size);
}

void ReceiveBufferPool::DropStaleLocked(absl::Time now) {
  for (auto it = idle_.begin(); it != idle_.end();) {
    if (now - it->second.since >= idle_release_) {
      ::munmap(it->second.data, it->first);
      idle_bytes_ -= it->first;
      it = idle_.erase(it);
    } else {
      ++it;
    }
  }
}

uint64_t ReceiveBufferPool::pooled_bytes() const {
  MutexLock lock(&mutex_);
  return idle_bytes_;
}

uint64_t ReceiveBufferPool::pooled_buffers() const {
  MutexLock lock(&mutex_);
  return idle_.size();
}

uint64_t ReceiveBufferPool::reused() const {
  MutexLock lock(&mutex_);
  return reused_;
}

}  // namespace tensord
