#include "client/src/heap_tensor_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "client/src/receive_buffer_pool.h"
#include "client/src/recycled_blocks.h"
#include "client/src/recycled_buffers.h"

namespace tensord {

void* HeapTensorMemory::Map(uint64_t size) {
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) return nullptr;
  ::madvise(data, size, MADV_HUGEPAGE);  // advice only; fine if THP is off
  return data;
}

absl::StatusOr<std::shared_ptr<HeapTensorMemory>> HeapTensorMemory::Allocate(uint64_t size) {
  if (size > UINT64_MAX - kRecycledBufferAlignment) {  // AlignedMalloc adds room to align
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
  }
  if (size >= kMmapThreshold) {
    void* data = Map(size);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot map ", size, " bytes"));
    }
    return std::make_shared<HeapTensorMemory>(Key(), data, nullptr, size, size, /*mapped=*/true,
                                              nullptr);
  }
  if (size <= kLargestRecycledBuffer) {
    // A small tensor's buffer is reused by this thread's next ones
    // (recycled_buffers.h); 0 bytes still get a buffer.
    const RecycledBuffer buffer = RecycledBuffers::Allocate(size);
    if (buffer.data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
    }
    // The object and its count in a recycled block too (recycled_blocks.h).
    return std::allocate_shared<HeapTensorMemory>(RecyclingAllocator<HeapTensorMemory>(), Key(),
                                                  buffer.data, buffer.block, size,
                                                  RecycledBuffers::CapacityFor(size),
                                                  /*mapped=*/false, nullptr);
  }
  const RecycledBuffer buffer = AlignedMalloc(size);
  if (buffer.data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
  }
  return std::make_shared<HeapTensorMemory>(Key(), buffer.data, buffer.block, size, size,
                                            /*mapped=*/false, nullptr);
}

HeapTensorMemory::~HeapTensorMemory() {
  if (pool_ != nullptr) {
    pool_->Release(data_, capacity_);
  } else if (mapped_) {
    ::munmap(data_, capacity_);
  } else if (size_ <= kLargestRecycledBuffer) {
    RecycledBuffers::Free({data_, block_}, size_);
  } else {
    std::free(block_);
  }
}

}  // namespace tensord
