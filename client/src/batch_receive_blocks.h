// Memory for the small items of one remote batch fetch: slices of shared
// blocks from the receive pool, not a malloc each. In a BatchFetch of 1024
// x 4 KiB, a buffer per item cost the client a malloc and a free per tensor
// and, once glibc had returned the freed heap to the kernel, a page fault
// per tensor in the next batch; the pool's blocks stay faulted in.
#ifndef TENSORD_CLIENT_SRC_BATCH_RECEIVE_BLOCKS_H_
#define TENSORD_CLIENT_SRC_BATCH_RECEIVE_BLOCKS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "client/src/receive_buffer_pool.h"
#include "tensord/tensor.h"

namespace tensord {

// Not thread-safe; one per batch call. A block lives until the last tensor
// sliced from it is dropped, so a tensor kept from a batch keeps its block
// (at most kBlockBytes) in memory.
class BatchReceiveBlocks {
 public:
  // Items up to this size are sliced from a block; larger ones get memory
  // of their own from the pool.
  static constexpr uint64_t kMaxSliceBytes = uint64_t{64} << 10;
  static constexpr uint64_t kBlockBytes = uint64_t{1} << 20;
  // Slices start on this boundary, as HeapTensorMemory's do.
  static constexpr uint64_t kSliceAlignment = 256;

  explicit BatchReceiveBlocks(ReceiveBufferPool& pool) : pool_(pool) {}

  // Writable memory for `size` bytes, never null (also for 0 bytes).
  // RESOURCE_EXHAUSTED when no block can be had.
  absl::StatusOr<std::shared_ptr<TensorMemory>> Allocate(uint64_t size);

 private:
  struct Block;
  ReceiveBufferPool& pool_;
  std::shared_ptr<Block> block_;  // the one being sliced
  uint64_t used_ = 0;             // of block_
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_BATCH_RECEIVE_BLOCKS_H_
