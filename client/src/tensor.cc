#include "tensord/tensor.h"

#include <cassert>
#include <utility>

#include "client/src/recycled_blocks.h"

namespace tensord {

// Everything a handed-out DLPack struct points at, freed by its deleter.
// The DLPack shape and strides point into `info`: while a Tensor holds the
// context it hands out only a const DLTensor, and once released nothing
// reads `info` but the consumer, through those pointers.
struct Tensor::Context {
  // Recycled: a batch makes and drops a thousand at once (recycled_blocks.h).
  static void* operator new(size_t size) {
    assert(size == sizeof(Context));
    return RecycledBlocks<sizeof(Context), alignof(Context)>::Allocate();
  }
  static void operator delete(void* block) {
    RecycledBlocks<sizeof(Context), alignof(Context)>::Free(block);
  }

  TensorInfo info;
  std::shared_ptr<TensorMemory> memory;
  DLManagedTensor legacy{};
  DLManagedTensorVersioned versioned{};
};

namespace {

void DeleteLegacy(DLManagedTensor* self) {
  delete static_cast<Tensor::Context*>(self->manager_ctx);
}

void DeleteVersioned(DLManagedTensorVersioned* self) {
  delete static_cast<Tensor::Context*>(self->manager_ctx);
}

}  // namespace

Tensor::Tensor(TensorInfo info, std::shared_ptr<TensorMemory> memory)
    : context_(new Context{.info = std::move(info), .memory = std::move(memory)}) {
  Context& c = *context_;
  DLTensor tensor{};
  tensor.data = static_cast<uint8_t*>(c.memory->data()) + c.info.byte_offset;
  tensor.device = c.memory->device();
  tensor.ndim = static_cast<int32_t>(c.info.shape.size());
  tensor.dtype = c.info.dtype;
  // Some consumers reject NULL shape/strides even for 0-d tensors.
  tensor.shape = c.info.shape.empty() ? nullptr : c.info.shape.data();
  tensor.strides = c.info.strides.empty() ? nullptr : c.info.strides.data();
  tensor.byte_offset = 0;
  c.legacy.dl_tensor = tensor;
  c.legacy.manager_ctx = context_;
  c.legacy.deleter = &DeleteLegacy;
  c.versioned.version = DLPackVersion{dlpack::kProducedMajorVersion, dlpack::kProducedMinorVersion};
  c.versioned.manager_ctx = context_;
  c.versioned.deleter = &DeleteVersioned;
  c.versioned.flags = (c.memory->read_only() ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) |
                      (c.memory->is_copy() ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
  c.versioned.dl_tensor = tensor;
}

Tensor::~Tensor() { delete context_; }

Tensor::Tensor(Tensor&& other) noexcept : context_(std::exchange(other.context_, nullptr)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    delete context_;
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

const DLTensor& Tensor::dl_tensor() const {
  assert(context_ != nullptr);
  return context_->legacy.dl_tensor;
}

const TensorInfo& Tensor::info() const {
  assert(context_ != nullptr);
  return context_->info;
}

uint64_t Tensor::data_bytes() const {
  return context_ == nullptr ? 0 : context_->info.total_bytes - context_->info.byte_offset;
}

DLManagedTensor* Tensor::release() {
  if (context_ == nullptr) return nullptr;
  return &std::exchange(context_, nullptr)->legacy;
}

DLManagedTensorVersioned* Tensor::release_versioned() {
  if (context_ == nullptr) return nullptr;
  return &std::exchange(context_, nullptr)->versioned;
}

}  // namespace tensord
