// Size and stride math for DLPack tensors, every step overflow-checked.
#ifndef TENSORD_SERVICE_DLPACK_TENSOR_LAYOUT_H_
#define TENSORD_SERVICE_DLPACK_TENSOR_LAYOUT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/dlpack.h"

namespace tensord::dlpack {

// Most dimensions a tensor may have.
inline constexpr int32_t kMaxDims = 32;

// The DLPack description of a tensor's bytes, owning its shape and strides.
struct TensorLayout {
  DLDataType dtype{kFloat, 32, 1};
  std::vector<int64_t> shape;
  // In elements; empty means compact row-major.
  std::vector<int64_t> strides;
  // Bytes from the start of the buffer to element [0, ..., 0].
  uint64_t byte_offset = 0;
  DLDevice device{kDLCPU, 0};

  friend bool operator==(const TensorLayout& a, const TensorLayout& b);
};

// Product of the extents. INVALID_ARGUMENT for a negative extent, more than
// kMaxDims dimensions, or a product that overflows int64.
absl::StatusOr<uint64_t> ElementCount(std::span<const int64_t> shape);

// Bytes of a compact tensor: numel * bits * lanes / 8, rounded up for packed
// sub-byte dtypes. Validates the dtype and shape; overflow-checked.
absl::StatusOr<uint64_t> CompactByteSize(DLDataType dtype, std::span<const int64_t> shape);

// Row-major strides (in elements) for `shape`.
std::vector<int64_t> CompactStrides(std::span<const int64_t> shape);
// The same into `strides`, which holds shape.size() entries.
void CompactStridesInto(std::span<const int64_t> shape, std::span<int64_t> strides);

// `layout.strides` when present, otherwise CompactStrides(layout.shape).
std::vector<int64_t> EffectiveStrides(const TensorLayout& layout);

// True when the elements are dense and row-major: strides empty or equal to
// the compact strides (ignoring dimensions of extent 1), or numel == 0.
bool IsCompact(const TensorLayout& layout);

// Bytes a buffer must hold for `layout`: byte_offset plus the extent reached
// by the strides ((max element offset + 1) * element size; 0 when numel is 0
// beyond byte_offset). Validates dtype, ndim, shape, that strides has one
// entry per dimension, that negative strides never reach before the buffer
// start, that sub-byte dtypes are compact with byte_offset 0, and that no
// step overflows. Each error is INVALID_ARGUMENT naming the field and value.
absl::StatusOr<uint64_t> RequiredBytes(const TensorLayout& layout);

// Bytes that negative strides reach before element [0, ..., 0]; 0 when none
// do. A caller's DLTensor may legitimately point into the middle of its
// allocation this way. Validates like RequiredBytes.
absl::StatusOr<uint64_t> BytesBeforeFirstElement(const TensorLayout& layout);

// RequiredBytes(layout) <= buffer_bytes, or INVALID_ARGUMENT naming both.
absl::Status ValidateLayoutFits(const TensorLayout& layout, uint64_t buffer_bytes);

// Copies the ndim/shape/strides/byte_offset/dtype/device of a DLTensor
// (strides may be NULL) into a TensorLayout, validating ndim and pointers.
absl::StatusOr<TensorLayout> LayoutOf(const DLTensor& tensor);

// "float32[2,3]" or "float32[2,3] strides=[1,2] byte_offset=8" for messages.
std::string DescribeLayout(const TensorLayout& layout);

}  // namespace tensord::dlpack

#endif  // TENSORD_SERVICE_DLPACK_TENSOR_LAYOUT_H_
