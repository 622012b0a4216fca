// Tensor bytes the client received over the network, in its own memory.
#ifndef TENSORD_CLIENT_SRC_HEAP_TENSOR_MEMORY_H_
#define TENSORD_CLIENT_SRC_HEAP_TENSOR_MEMORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "tensord/tensor.h"

namespace tensord {

// 256-byte aligned (page aligned when large), never NULL (a zero-size tensor still gets a valid block).
class HeapTensorMemory final : public TensorMemory {
 public:
  // RESOURCE_EXHAUSTED when `size` bytes cannot be allocated.
  static absl::StatusOr<std::shared_ptr<HeapTensorMemory>> Allocate(uint64_t size);
  ~HeapTensorMemory() override;

  void* data() override { return data_; }
  bool read_only() const override { return false; }
  bool is_copy() const override { return true; }
  uint64_t size() const { return size_; }

 private:
  HeapTensorMemory(void* data, uint64_t size, bool mapped)
      : data_(data), size_(size), mapped_(mapped) {}
  void* data_;
  uint64_t size_;
  bool mapped_;  // from mmap (large) rather than aligned_alloc
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_HEAP_TENSOR_MEMORY_H_
