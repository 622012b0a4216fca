#include "client/src/host_tensor_source.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/dlpack/strided_copy.h"

namespace tensord {

absl::Status ValidateHostTensor(const DLTensor& tensor, absl::string_view what) {
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout layout, dlpack::LayoutOf(tensor));
  if (layout.device.device_type != kDLCPU && layout.device.device_type != kDLCUDAHost) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " device type ", layout.device.device_type, " is not host memory"));
  }
  TENSORD_ASSIGN_OR_RETURN(uint64_t size, dlpack::CompactByteSize(layout.dtype, layout.shape));
  if (size > 0 && tensor.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, " data is NULL but it has elements"));
  }
  // The caller's allocation may start before element 0 (negative strides);
  // count from there, so only overflow and inconsistency are errors.
  TENSORD_ASSIGN_OR_RETURN(uint64_t before, dlpack::BytesBeforeFirstElement(layout));
  if (__builtin_add_overflow(layout.byte_offset, before, &layout.byte_offset)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " byte_offset overflows"));
  }
  return dlpack::RequiredBytes(layout).status();
}

absl::StatusOr<CompactSource> CompactSourceOf(const DLTensor& tensor) {
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout layout, dlpack::LayoutOf(tensor));
  TENSORD_ASSIGN_OR_RETURN(uint64_t size, dlpack::CompactByteSize(layout.dtype, layout.shape));
  CompactSource source;
  source.size = size;
  source.layout.dtype = layout.dtype;
  if (size == 0 || dlpack::IsCompact(layout)) {
    if (size > 0) source.data = static_cast<const uint8_t*>(tensor.data) + layout.byte_offset;
    source.layout.shape = std::move(layout.shape);  // `layout` is not read again
    return source;
  }
  source.layout.shape = layout.shape;
  TENSORD_ASSIGN_OR_RETURN(source.packed, HeapTensorMemory::Allocate(size));
  TENSORD_RETURN_IF_ERROR(
      dlpack::CopyStrided(tensor.data, layout, source.packed->data(), source.layout));
  source.data = static_cast<const uint8_t*>(source.packed->data());
  return source;
}

}  // namespace tensord
