// Large receive buffers kept after their tensor is released, so the next
// remote Fetch into "new" memory reuses pages that are already faulted in
// instead of paying the first touch of every page again.
#ifndef TENSORD_CLIENT_SRC_RECEIVE_BUFFER_POOL_H_
#define TENSORD_CLIENT_SRC_RECEIVE_BUFFER_POOL_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/src/heap_tensor_memory.h"
#include "service/common/mutex.h"

namespace tensord {

// Bounded by bytes: a release that takes the pool above `max_bytes` unmaps
// the longest idle buffers until it fits. Pooled buffers
// are MADV_FREE'd, so under memory pressure the kernel takes their pages
// back (a reclaimed page faults in as zeros on its next write) without the
// pool noticing; and a buffer left unused for `idle_release` is unmapped at
// the pool's next Allocate or release. Only mappings of at least
// HeapTensorMemory::kMmapThreshold are pooled; smaller ones come from
// malloc, which already reuses memory. Thread-safe; tensors hold the pool,
// so it outlives the client that made it while any of its tensors live.
class ReceiveBufferPool final : public std::enable_shared_from_this<ReceiveBufferPool> {
 public:
  // `max_bytes` 0 turns pooling off (every Allocate maps new memory).
  static std::shared_ptr<ReceiveBufferPool> Create(uint64_t max_bytes,
                                                   absl::Duration idle_release = absl::Seconds(30));
  ~ReceiveBufferPool();
  ReceiveBufferPool(const ReceiveBufferPool&) = delete;
  ReceiveBufferPool& operator=(const ReceiveBufferPool&) = delete;

  // Memory for `size` bytes: a pooled mapping when one fits (at least
  // `size`, at most a quarter plus 256 KiB larger, so a small tensor never
  // pins a huge buffer), else new memory. RESOURCE_EXHAUSTED when mapping fails.
  absl::StatusOr<std::shared_ptr<HeapTensorMemory>> Allocate(uint64_t size);

  uint64_t pooled_bytes() const;
  uint64_t pooled_buffers() const;
  uint64_t reused() const;  // Allocate calls served from the pool

 private:
  ReceiveBufferPool(uint64_t max_bytes, absl::Duration idle_release)
      : max_bytes_(max_bytes), idle_release_(idle_release) {}
  struct Idle {
    void* data;
    absl::Time since;
  };
  // Called by a pooled HeapTensorMemory's destructor.
  void Release(void* data, uint64_t capacity);
  // Unmaps buffers idle longer than idle_release_.
  void DropStaleLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const uint64_t max_bytes_;
  const absl::Duration idle_release_;
  mutable Mutex mutex_;
  // By capacity.
  std::multimap<uint64_t, Idle> idle_ ABSL_GUARDED_BY(mutex_);
  uint64_t idle_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t reused_ ABSL_GUARDED_BY(mutex_) = 0;

  friend class HeapTensorMemory;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_RECEIVE_BUFFER_POOL_H_
