#include "service/dlpack/strided_copy.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord::dlpack {
namespace {

// One dimension of the copy, strides in bytes for each side.
struct CopyDim {
  int64_t extent = 0;
  int64_t source_stride = 0;
  int64_t destination_stride = 0;
};

// The copy reduced to its essentials: fixed-size storage so that planning
// never allocates per dimension, and dims ordered outermost first.
struct CopyPlan {
  std::array<CopyDim, kMaxDims> dims{};
  int ndim = 0;
  int64_t element_bytes = 0;
};

absl::Status CheckSameTensor(const TensorLayout& source, const TensorLayout& destination) {
  if (!(source.dtype == destination.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("CopyStrided needs equal dtypes; source is ",
                                                   DataTypeName(source.dtype), ", destination is ",
                                                   DataTypeName(destination.dtype)));
  }
  if (source.shape != destination.shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyStrided needs equal shapes; source is [", absl::StrJoin(source.shape, ","),
        "], destination is [", absl::StrJoin(destination.shape, ","), "]"));
  }
  return absl::OkStatus();
}

// Drops extent-1 dimensions (their strides address nothing) and merges each
// dimension into its outer neighbour when both sides step through the pair as
// one, so a compact-to-compact copy ends as a single dimension.
absl::StatusOr<CopyPlan> PlanCopy(const TensorLayout& source, const TensorLayout& destination) {
  const std::vector<int64_t> source_strides = EffectiveStrides(source);
  const std::vector<int64_t> destination_strides = EffectiveStrides(destination);
  if (source_strides.size() != source.shape.size() ||
      destination_strides.size() != destination.shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyStrided: strides do not match ndim ", source.shape.size()));
  }
  CopyPlan plan;
  plan.element_bytes = static_cast<int64_t>(ElementBytes(source.dtype));
  for (size_t i = 0; i < source.shape.size(); ++i) {
    CopyDim dim{source.shape[i], 0, 0};
    if (dim.extent == 1) continue;
    if (__builtin_mul_overflow(source_strides[i], plan.element_bytes, &dim.source_stride) ||
        __builtin_mul_overflow(destination_strides[i], plan.element_bytes,
                               &dim.destination_stride)) {
      return absl::InvalidArgumentError(
          absl::StrCat("CopyStrided: byte stride of dimension ", i, " overflows int64"));
    }
    if (plan.ndim > 0) {
      CopyDim& outer = plan.dims[plan.ndim - 1];
      // Overflow-free: outer's strides are in range, so equality implies the
      // products are in range too; the check only rejects.
      int64_t source_span = 0;
      int64_t destination_span = 0;
      if (!__builtin_mul_overflow(dim.source_stride, dim.extent, &source_span) &&
          !__builtin_mul_overflow(dim.destination_stride, dim.extent, &destination_span) &&
          outer.source_stride == source_span && outer.destination_stride == destination_span) {
        outer = CopyDim{outer.extent * dim.extent, dim.source_stride, dim.destination_stride};
        continue;
      }
    }
    plan.dims[plan.ndim++] = dim;
  }
  return plan;
}

// Copies `count` elements of a fixed size `N` between strided positions; a
// constant-size memcpy compiles to one load and one store.
template <size_t N>
void CopyElements(const char* source, int64_t source_stride, char* destination,
                  int64_t destination_stride, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(destination + i * destination_stride, source + i * source_stride, N);
  }
}

// The innermost loop: either one contiguous run or a strided walk along the
// last planned dimension.
struct InnerCopy {
  bool contiguous = false;
  int64_t run_bytes = 0;  // When contiguous.
  CopyDim dim;            // When strided.
  int64_t element_bytes = 0;

  void Run(const char* source, char* destination) const {
    if (contiguous) {
      std::memcpy(destination, source, static_cast<size_t>(run_bytes));
      return;
    }
    const int64_t ss = dim.source_stride;
    const int64_t ds = dim.destination_stride;
    switch (element_bytes) {
      case 1: return CopyElements<1>(source, ss, destination, ds, dim.extent);
      case 2: return CopyElements<2>(source, ss, destination, ds, dim.extent);
      case 4: return CopyElements<4>(source, ss, destination, ds, dim.extent);
      case 8: return CopyElements<8>(source, ss, destination, ds, dim.extent);
      case 16: return CopyElements<16>(source, ss, destination, ds, dim.extent);
      default: break;
    }
    for (int64_t i = 0; i < dim.extent; ++i) {
      std::memcpy(destination + i * ds, source + i * ss, static_cast<size_t>(element_bytes));
    }
  }
};

// Takes the innermost dimension off `plan` and decides how to copy it.
InnerCopy TakeInner(CopyPlan& plan) {
  InnerCopy inner;
  inner.element_bytes = plan.element_bytes;
  if (plan.ndim == 0) {  // 0-d, or every extent is 1: one element.
    inner.contiguous = true;
    inner.run_bytes = plan.element_bytes;
    return inner;
  }
  const CopyDim last = plan.dims[--plan.ndim];
  if (last.source_stride == plan.element_bytes && last.destination_stride == plan.element_bytes) {
    inner.contiguous = true;
    inner.run_bytes = last.extent * plan.element_bytes;
  } else {
    inner.dim = last;
  }
  return inner;
}

// Walks the outer dimensions with an odometer, moving both offsets by one
// stride per step and rewinding a dimension when it wraps. Offsets stay within
// the extent the strides reach, so no pointer is ever formed outside the
// buffers and no step can overflow for a layout RequiredBytes accepted.
void RunPlan(CopyPlan plan, const char* source, char* destination) {
  const InnerCopy inner = TakeInner(plan);
  std::array<int64_t, kMaxDims> index{};
  int64_t source_offset = 0;
  int64_t destination_offset = 0;
  while (true) {
    inner.Run(source + source_offset, destination + destination_offset);
    int d = plan.ndim - 1;
    for (; d >= 0; --d) {
      const CopyDim& dim = plan.dims[d];
      if (++index[d] < dim.extent) {
        source_offset += dim.source_stride;
        destination_offset += dim.destination_stride;
        break;
      }
      index[d] = 0;
      source_offset -= (dim.extent - 1) * dim.source_stride;
      destination_offset -= (dim.extent - 1) * dim.destination_stride;
    }
    if (d < 0) return;
  }
}

absl::Status CopySubByte(const char* source, const TensorLayout& source_layout, char* destination,
                         const TensorLayout& destination_layout) {
  if (!IsCompact(source_layout) || !IsCompact(destination_layout)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyStrided: ", DataTypeName(source_layout.dtype),
        " elements are packed densely, so both sides must be compact; source is ",
        DescribeLayout(source_layout), ", destination is ", DescribeLayout(destination_layout)));
  }
  TENSORD_ASSIGN_OR_RETURN(const uint64_t bytes,
                           CompactByteSize(source_layout.dtype, source_layout.shape));
  if (bytes > 0) std::memcpy(destination, source, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

}  // namespace

absl::Status CopyStrided(const void* source_base, const TensorLayout& source_layout,
                         void* destination_base, const TensorLayout& destination_layout) {
  TENSORD_RETURN_IF_ERROR(CheckSameTensor(source_layout, destination_layout));
  TENSORD_RETURN_IF_ERROR(ValidateDataType(source_layout.dtype));
  TENSORD_ASSIGN_OR_RETURN(const uint64_t numel, ElementCount(source_layout.shape));
  if (numel == 0) return absl::OkStatus();

  const char* source = static_cast<const char*>(source_base) + source_layout.byte_offset;
  char* destination = static_cast<char*>(destination_base) + destination_layout.byte_offset;
  if (IsSubByte(source_layout.dtype)) {
    return CopySubByte(source, source_layout, destination, destination_layout);
  }
  if (IsCompact(source_layout) && IsCompact(destination_layout)) {
    // One run, as the plan would merge it to, without planning (which
    // builds both sides' strides: two allocations a copy, a tenth of a
    // local batch put's client work in 4 KiB items).
    TENSORD_ASSIGN_OR_RETURN(const uint64_t bytes,
                             CompactByteSize(source_layout.dtype, source_layout.shape));
    std::memcpy(destination, source, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  TENSORD_ASSIGN_OR_RETURN(const CopyPlan plan, PlanCopy(source_layout, destination_layout));
  RunPlan(plan, source, destination);
  return absl::OkStatus();
}

}  // namespace tensord::dlpack
