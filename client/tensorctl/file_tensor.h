// DLTensor views of tensors that lie in a memory-mapped file, so put and
// load send straight from the page cache without a copy.
#ifndef TENSORD_CLIENT_TENSORCTL_FILE_TENSOR_H_
#define TENSORD_CLIENT_TENSORCTL_FILE_TENSOR_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord::tensorctl {

// A host DLTensor for the tensor `layout` describes, whose bytes are
// `file.substr(begin, end - begin)`. The result points into `file` and into
// `layout`'s shape and strides (strides NULL when compact), so both must
// outlive it. INVALID_ARGUMENT when the range is outside the file or too
// small for the layout. Client::Put only reads the bytes, so the read-only
// mapping is safe to pass as DLTensor's non-const data.
absl::StatusOr<DLTensor> FileTensor(std::string_view file, uint64_t begin, uint64_t end,
                                    const dlpack::TensorLayout& layout);

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_FILE_TENSOR_H_
