#include "client/src/heap_tensor_memory.h"

#include <sys/mman.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tensord {
namespace {

constexpr uint64_t kAlignment = 256;
// From this size on, memory comes straight from mmap with transparent huge
// pages requested: a fetch then faults 2 MiB pages instead of 4 KiB ones,
// which was a quarter of a large fetch's client time.
constexpr uint64_t kMmapThreshold = uint64_t{2} << 20;

}  // namespace

absl::StatusOr<std::shared_ptr<HeapTensorMemory>> HeapTensorMemory::Allocate(uint64_t size) {
  if (size > UINT64_MAX - kAlignment) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
  }
  if (size >= kMmapThreshold) {
    void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot map ", size, " bytes"));
    }
    ::madvise(data, size, MADV_HUGEPAGE);  // advice only; fine if THP is off
    return std::shared_ptr<HeapTensorMemory>(new HeapTensorMemory(data, size, /*mapped=*/true));
  }
  // aligned_alloc wants a multiple of the alignment; 0 becomes one block.
  uint64_t rounded = size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
  }
  return std::shared_ptr<HeapTensorMemory>(new HeapTensorMemory(data, size, /*mapped=*/false));
}

HeapTensorMemory::~HeapTensorMemory() {
  if (mapped_) {
    ::munmap(data_, size_);
  } else {
    std::free(data_);
  }
}

}  // namespace tensord
