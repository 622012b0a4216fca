// How tensorctl writes tensor metadata for people to read.
#ifndef TENSORD_CLIENT_TENSORCTL_TENSOR_TEXT_H_
#define TENSORD_CLIENT_TENSORCTL_TENSOR_TEXT_H_

#include <cstdint>
#include <span>
#include <string>

#include "service/dlpack/dlpack_compat.h"
#include "tensord/tensor.h"

namespace tensord::tensorctl {

// "[2,3]"; "[]" for a scalar.
std::string FormatShape(std::span<const int64_t> shape);

// "float32[2,3]", the form DescribeLayout uses, so messages read alike.
std::string DescribeTensor(const TensorInfo& info);

// "cpu", "cuda:0", "cuda_host", "device_type9:0".
std::string FormatDevice(DLDevice device);

// "512.0 MiB/s"; "-" when no time has passed.
std::string FormatThroughput(uint64_t bytes, double seconds);

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_TENSOR_TEXT_H_
