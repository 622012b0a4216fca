// Writing fetched tensors as .npy: the header for a tensor (or why .npy
// cannot hold it) and its elements in compact row-major order.
#ifndef TENSORD_CLIENT_TENSORCTL_NPY_OUTPUT_H_
#define TENSORD_CLIENT_TENSORCTL_NPY_OUTPUT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/tensorctl/output_file.h"
#include "tensord/tensor.h"

namespace tensord::tensorctl {

// The .npy header for `info`, or an error that points to get-raw for dtypes
// .npy has no descr for (bfloat16, fp8, sub-byte ints, vector lanes).
absl::StatusOr<std::string> NpyHeaderFor(std::string_view name, const TensorInfo& info);

// Writes the elements of `tensor` in compact row-major order: directly when
// they already are, through a compact copy otherwise.
absl::Status WriteCompact(const Tensor& tensor, OutputFile& output);

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_NPY_OUTPUT_H_
