#include "client/src/heap_tensor_memory.h"

#include <sys/mman.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "client/src/receive_buffer_pool.h"

namespace tensord {
namespace {

constexpr uint64_t kAlignment = 256;

}  // namespace

void* HeapTensorMemory::Map(uint64_t size) {
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) return nullptr;
  ::madvise(data, size, MADV_HUGEPAGE);  // advice only; fine if THP is off
  return data;
}

absl::StatusOr<std::shared_ptr<HeapTensorMemory>> HeapTensorMemory::Allocate(uint64_t size) {
  if (size > UINT64_MAX - kAlignment) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
  }
  if (size >= kMmapThreshold) {
    void* data = Map(size);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot map ", size, " bytes"));
    }
    return std::shared_ptr<HeapTensorMemory>(
        new HeapTensorMemory(data, size, size, /*mapped=*/true, nullptr));
  }
  // aligned_alloc wants a multiple of the alignment; 0 becomes one block.
  uint64_t rounded = size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
  }
  return std::shared_ptr<HeapTensorMemory>(
      new HeapTensorMemory(data, size, rounded, /*mapped=*/false, nullptr));
}

HeapTensorMemory::~HeapTensorMemory() {
  if (pool_ != nullptr) {
    pool_->Release(data_, capacity_);
  } else if (mapped_) {
    ::munmap(data_, capacity_);
  } else {
    std::free(data_);
  }
}

}  // namespace tensord
