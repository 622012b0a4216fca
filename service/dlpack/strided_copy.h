// Copies between strided layouts of the same dtype and shape on the host.
#ifndef TENSORD_SERVICE_DLPACK_STRIDED_COPY_H_
#define TENSORD_SERVICE_DLPACK_STRIDED_COPY_H_

#include "absl/status/status.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord::dlpack {

// Copies every element of the tensor described by (`source_base`,
// `source_layout`) into (`destination_base`, `destination_layout`). Bases are
// buffer starts; each layout's byte_offset is applied. dtypes and shapes must
// match (INVALID_ARGUMENT otherwise); sub-byte dtypes must be compact on both
// sides. Runs of contiguous elements are copied with memcpy, so compact to
// compact is one memcpy. Callers have validated both layouts against their
// buffers (RequiredBytes).
absl::Status CopyStrided(const void* source_base, const TensorLayout& source_layout,
                         void* destination_base, const TensorLayout& destination_layout);

}  // namespace tensord::dlpack

#endif  // TENSORD_SERVICE_DLPACK_STRIDED_COPY_H_
