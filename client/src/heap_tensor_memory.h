// Tensor bytes the client received over the network, in its own memory.
#ifndef TENSORD_CLIENT_SRC_HEAP_TENSOR_MEMORY_H_
#define TENSORD_CLIENT_SRC_HEAP_TENSOR_MEMORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "tensord/tensor.h"

namespace tensord {

class ReceiveBufferPool;

// 256-byte aligned (page aligned when large), never NULL (a zero-size tensor still gets a valid
// block).
class HeapTensorMemory final : public TensorMemory {
 public:
  // From this size on, memory comes straight from mmap with transparent huge
  // pages requested (a fetch then faults 2 MiB pages instead of 4 KiB ones,
  // which was a quarter of a large fetch's client time), and a client's
  // receive pool keeps it for reuse: a 1 MiB Fetch faulted its buffer in
  // each time while malloc mapped and unmapped blocks of that size.
  static constexpr uint64_t kMmapThreshold = uint64_t{256} << 10;

  // RESOURCE_EXHAUSTED when `size` bytes cannot be allocated.
  static absl::StatusOr<std::shared_ptr<HeapTensorMemory>> Allocate(uint64_t size);
  ~HeapTensorMemory() override;

  // Only for this class and ReceiveBufferPool: lets std::make_shared put
  // the object and its count in one allocation.
  class Key {
    friend class HeapTensorMemory;
    friend class ReceiveBufferPool;
    Key() = default;
  };
  // `block`: what to free(3) (small memory, aligned inside it), else null.
  HeapTensorMemory(Key, void* data, void* block, uint64_t size, uint64_t capacity, bool mapped,
                   std::shared_ptr<ReceiveBufferPool> pool)
      : data_(data),
        block_(block),
        size_(size),
        capacity_(capacity),
        mapped_(mapped),
        pool_(std::move(pool)) {}

  void* data() override { return data_; }
  bool read_only() const override { return false; }
  bool is_copy() const override { return true; }
  uint64_t size() const { return size_; }

 private:
  friend class ReceiveBufferPool;
  // A new anonymous mapping of `size` bytes, THP-advised; nullptr on failure.
  static void* Map(uint64_t size);

  void* data_;
  void* block_;  // from malloc, holding data_ aligned; null when mapped
  uint64_t size_;
  uint64_t capacity_;  // of the mapping or recycled buffer (at least size_)
  bool mapped_;        // from mmap (large) rather than malloc
  // Where a mapping goes back to instead of munmap; null when unpooled.
  std::shared_ptr<ReceiveBufferPool> pool_;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_HEAP_TENSOR_MEMORY_H_
