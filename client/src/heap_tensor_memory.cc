#include "client/src/heap_tensor_memory.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tensord {

absl::StatusOr<std::shared_ptr<HeapTensorMemory>> HeapTensorMemory::Allocate(uint64_t size) {
  constexpr uint64_t kAlignment = 256;
  if (size > UINT64_MAX - kAlignment) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
  }
  // aligned_alloc wants a multiple of the alignment; 0 becomes one block.
  uint64_t rounded = size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
  }
  return std::shared_ptr<HeapTensorMemory>(new HeapTensorMemory(data, size));
}

HeapTensorMemory::~HeapTensorMemory() { std::free(data_); }

}  // namespace tensord
