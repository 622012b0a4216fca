// How tensorctl writes tensor metadata for people to read.
#ifndef TENSORD_CLIENT_TENSORCTL_TENSOR_TEXT_H_
#define TENSORD_CLIENT_TENSORCTL_TENSOR_TEXT_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "tensord/dlpack.h"
#include "tensord/tensor.h"

namespace tensord::tensorctl {

// "[2,3]"; "[]" for a scalar.
std::string FormatShape(std::span<const int64_t> shape);

// "float32[2,3]", the form DescribeLayout uses, so messages read alike.
std::string DescribeTensor(const TensorInfo& info);

// "cpu", "cuda:0", "cuda_host", "device_type9:0".
std::string FormatDevice(DLDevice device);

// Reads "cpu" or "cuda:N" (what FormatDevice writes for them);
// INVALID_ARGUMENT names any other text.
absl::StatusOr<DLDevice> ParseDevice(absl::string_view text);

// "512.0 MiB/s"; "-" when no time has passed.
std::string FormatThroughput(uint64_t bytes, double seconds);

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_TENSOR_TEXT_H_
