#include "service/dlpack/tensor_layout.h"

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"

namespace tensord::dlpack {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string Bracketed(std::span<const int64_t> values) {
  return absl::StrCat("[", absl::StrJoin(values, ","), "]");
}

std::string DeviceName(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return absl::StrCat("cuda:", device.device_id);
    case kDLCUDAHost: return "cuda_host";
    default:
      return absl::StrCat("device", static_cast<int>(device.device_type), ":", device.device_id);
  }
}

absl::Status ValidateNdim(size_t ndim) {
  if (ndim > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ndim ", ndim, " exceeds the maximum of ", kMaxDims, " dimensions"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStridesCount(const TensorLayout& layout) {
  if (!layout.strides.empty() && layout.strides.size() != layout.shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat("strides has ", layout.strides.size(),
                                                   " entries but ndim is ", layout.shape.size()));
  }
  return absl::OkStatus();
}

// Sub-byte elements have no byte address of their own, so only the dense
// packing (compact, starting at byte 0) has a meaning.
absl::StatusOr<uint64_t> SubByteRequiredBytes(const TensorLayout& layout) {
  if (layout.byte_offset != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        DataTypeName(layout.dtype), " elements are packed densely, so byte_offset must be 0, not ",
        layout.byte_offset));
  }
  if (!IsCompact(layout)) {
    return absl::InvalidArgumentError(absl::StrCat(
        DataTypeName(layout.dtype), " elements are packed densely, so the tensor must be compact; ",
        "strides ", Bracketed(layout.strides), " are not row-major for shape ",
        Bracketed(layout.shape)));
  }
  return CompactByteSize(layout.dtype, layout.shape);
}

// Lowest and highest element offsets (in elements, relative to element
// [0, ..., 0]) that the strides reach; numel must be > 0.
struct OffsetRange {
  int64_t min = 0;
  int64_t max = 0;
  int first_negative_dim = -1;
};

absl::StatusOr<OffsetRange> ReachedOffsets(std::span<const int64_t> shape,
                                           std::span<const int64_t> strides) {
  OffsetRange range;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t term = 0;
    int64_t* bound = strides[i] < 0 ? &range.min : &range.max;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &term) ||
        __builtin_add_overflow(*bound, term, bound)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "offset reached by strides ", Bracketed(strides), " over shape ", Bracketed(shape),
          " overflows int64 (at strides[", i, "] = ", strides[i], ")"));
    }
    if (strides[i] < 0 && shape[i] > 1 && range.first_negative_dim < 0) {
      range.first_negative_dim = static_cast<int>(i);
    }
  }
  return range;
}

absl::StatusOr<uint64_t> ByteAddressableRequiredBytes(const TensorLayout& layout, uint64_t numel) {
  if (layout.byte_offset > static_cast<uint64_t>(kInt64Max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte_offset ", layout.byte_offset, " exceeds int64"));
  }
  const auto byte_offset = static_cast<int64_t>(layout.byte_offset);
  if (numel == 0) return layout.byte_offset;
  const auto element_bytes = static_cast<int64_t>(ElementBytes(layout.dtype));
  // Built only on failure: this runs on every fetch, put and Stat answer.
  const auto overflow = [&layout] {
    return absl::StrCat("byte extent of ", DescribeLayout(layout), " overflows int64");
  };
  if (layout.strides.empty()) {
    // Compact (most layouts): the elements [0, numel) follow byte_offset,
    // what the strides below would reach (numel fits int64: ElementCount).
    int64_t end = 0;
    if (__builtin_mul_overflow(static_cast<int64_t>(numel), element_bytes, &end) ||
        __builtin_add_overflow(end, byte_offset, &end)) {
      return absl::InvalidArgumentError(overflow());
    }
    return static_cast<uint64_t>(end);
  }

  const std::span<const int64_t> strides = layout.strides;
  TENSORD_ASSIGN_OR_RETURN(const OffsetRange range, ReachedOffsets(layout.shape, strides));

  int64_t before_start = 0;  // Bytes reached before element [0, ..., 0].
  // range.min <= 0 may be INT64_MIN itself, whose negation overflows:
  // multiply by -element_bytes instead, which the builtin checks.
  if (__builtin_mul_overflow(range.min, -element_bytes, &before_start)) {
    return absl::InvalidArgumentError(overflow());
  }
  if (before_start > byte_offset) {
    const int dim = range.first_negative_dim;
    return absl::InvalidArgumentError(
        absl::StrCat("negative strides[", dim, "] = ", strides[dim], " reach ", before_start,
                     " bytes before element 0 but byte_offset is only ", byte_offset));
  }

  int64_t end = 0;
  if (__builtin_add_overflow(range.max, 1, &end) ||
      __builtin_mul_overflow(end, element_bytes, &end) ||
      __builtin_add_overflow(end, byte_offset, &end)) {
    return absl::InvalidArgumentError(overflow());
  }
  return static_cast<uint64_t>(end);
}

}  // namespace

absl::StatusOr<uint64_t> BytesBeforeFirstElement(const TensorLayout& layout) {
  TENSORD_RETURN_IF_ERROR(ValidateDataType(layout.dtype));
  TENSORD_RETURN_IF_ERROR(ValidateNdim(layout.shape.size()));
  TENSORD_RETURN_IF_ERROR(ValidateStridesCount(layout));
  TENSORD_ASSIGN_OR_RETURN(const uint64_t numel, ElementCount(layout.shape));
  // Compact strides reach nothing before element 0 (and need no vector).
  if (numel == 0 || IsSubByte(layout.dtype) || layout.strides.empty()) return 0;
  TENSORD_ASSIGN_OR_RETURN(const OffsetRange range, ReachedOffsets(layout.shape, layout.strides));
  int64_t before = 0;
  // range.min may be INT64_MIN: negate through the checked multiply.
  if (__builtin_mul_overflow(range.min, -static_cast<int64_t>(ElementBytes(layout.dtype)),
                             &before)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte extent of ", DescribeLayout(layout), " overflows int64"));
  }
  return static_cast<uint64_t>(before);
}

bool operator==(const TensorLayout& a, const TensorLayout& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.strides == b.strides &&
         a.byte_offset == b.byte_offset && a.device.device_type == b.device.device_type &&
         a.device.device_id == b.device.device_id;
}

absl::StatusOr<uint64_t> ElementCount(std::span<const int64_t> shape) {
  TENSORD_RETURN_IF_ERROR(ValidateNdim(shape.size()));
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape[", i, "] is ", shape[i], "; extents must be >= 0"));
    }
    has_zero = has_zero || shape[i] == 0;
  }
  // An empty tensor is valid however large its other extents are.
  if (has_zero) return 0;
  int64_t count = 1;
  for (int64_t extent : shape) {
    if (__builtin_mul_overflow(count, extent, &count)) {
      return absl::InvalidArgumentError(
          absl::StrCat("element count of shape ", Bracketed(shape), " overflows int64"));
    }
  }
  return static_cast<uint64_t>(count);
}

absl::StatusOr<uint64_t> CompactByteSize(DLDataType dtype, std::span<const int64_t> shape) {
  TENSORD_RETURN_IF_ERROR(ValidateDataType(dtype));
  TENSORD_ASSIGN_OR_RETURN(const uint64_t numel, ElementCount(shape));
  uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, ElementBits(dtype), &bits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size of ", DataTypeName(dtype), Bracketed(shape), " overflows int64"));
  }
  // Rounded up without computing bits + 7, which could wrap.
  const uint64_t bytes = bits / 8 + (bits % 8 != 0 ? 1 : 0);
  if (bytes > static_cast<uint64_t>(kInt64Max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size of ", DataTypeName(dtype), Bracketed(shape), " overflows int64"));
  }
  return bytes;
}

std::vector<int64_t> CompactStrides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  CompactStridesInto(shape, strides);
  return strides;
}

void CompactStridesInto(std::span<const int64_t> shape, std::span<int64_t> strides) {
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // Zero extents count as 1 (as PyTorch does) so strides stay distinct;
    // an unvalidated shape that overflows saturates instead of wrapping.
    const int64_t extent = shape[i] > 1 ? shape[i] : 1;
    if (__builtin_mul_overflow(stride, extent, &stride)) stride = kInt64Max;
  }
}

std::vector<int64_t> EffectiveStrides(const TensorLayout& layout) {
  return layout.strides.empty() ? CompactStrides(layout.shape) : layout.strides;
}

bool IsCompact(const TensorLayout& layout) {
  if (layout.strides.empty()) return true;
  if (layout.strides.size() != layout.shape.size()) return false;
  for (int64_t extent : layout.shape) {
    if (extent == 0) return true;
  }
  int64_t expected = 1;
  for (size_t i = layout.shape.size(); i-- > 0;) {
    const int64_t extent = layout.shape[i];
    if (extent < 0) return false;
    // The stride of an extent-1 dimension is never used to address anything.
    if (extent != 1 && layout.strides[i] != expected) return false;
    if (__builtin_mul_overflow(expected, extent, &expected)) return false;
  }
  return true;
}

absl::StatusOr<uint64_t> RequiredBytes(const TensorLayout& layout) {
  TENSORD_RETURN_IF_ERROR(ValidateDataType(layout.dtype));
  TENSORD_RETURN_IF_ERROR(ValidateNdim(layout.shape.size()));
  TENSORD_RETURN_IF_ERROR(ValidateStridesCount(layout));
  TENSORD_ASSIGN_OR_RETURN(const uint64_t numel, ElementCount(layout.shape));
  if (IsSubByte(layout.dtype)) return SubByteRequiredBytes(layout);
  return ByteAddressableRequiredBytes(layout, numel);
}

absl::Status ValidateLayoutFits(const TensorLayout& layout, uint64_t buffer_bytes) {
  TENSORD_ASSIGN_OR_RETURN(const uint64_t required, RequiredBytes(layout));
  if (required > buffer_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeLayout(layout), " needs ", required,
                                                   " bytes but the buffer holds ", buffer_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorLayout> LayoutOf(const DLTensor& tensor) {
  if (tensor.ndim < 0 || tensor.ndim > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("ndim ", tensor.ndim, " is not in [0, ", kMaxDims, "]"));
  }
  if (tensor.ndim > 0 && tensor.shape == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("shape is NULL but ndim is ", tensor.ndim));
  }
  TensorLayout layout;
  layout.dtype = tensor.dtype;
  layout.shape.assign(tensor.shape, tensor.shape + tensor.ndim);
  // NULL strides (allowed before DLPack 1.2) mean compact row-major.
  if (tensor.strides != nullptr) {
    layout.strides.assign(tensor.strides, tensor.strides + tensor.ndim);
  }
  layout.byte_offset = tensor.byte_offset;
  layout.device = tensor.device;
  return layout;
}

std::string DescribeLayout(const TensorLayout& layout) {
  std::string out = absl::StrCat(DataTypeName(layout.dtype), Bracketed(layout.shape));
  if (!layout.strides.empty()) absl::StrAppend(&out, " strides=", Bracketed(layout.strides));
  if (layout.byte_offset != 0) absl::StrAppend(&out, " byte_offset=", layout.byte_offset);
  if (layout.device.device_type != kDLCPU) {
    absl::StrAppend(&out, " device=", DeviceName(layout.device));
  }
  return out;
}

}  // namespace tensord::dlpack
