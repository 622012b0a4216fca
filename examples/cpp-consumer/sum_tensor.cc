// Fetches a float32 tensor from tensord and hands it to a DLPack consumer,
// which sums it and frees it through the DLManagedTensor's deleter.
// Usage: sum_tensor SERVER NAME   (e.g. sum_tensor 127.0.0.1:50051 weights/w)
#include <cstdint>
#include <cstdio>
#include <memory>

#include "tensord/client.h"

namespace {

// Any DLPack consumer (a framework's from_dlpack) takes ownership the same
// way: read the DLTensor, then call the deleter exactly once.
double ConsumeAndSum(DLManagedTensor* managed) {
  const DLTensor& tensor = managed->dl_tensor;
  double sum = 0;
  if (tensor.device.device_type == kDLCPU && tensor.dtype.code == kDLFloat &&
      tensor.dtype.bits == 32 && tensor.dtype.lanes == 1) {
    int64_t count = 1;
    for (int32_t i = 0; i < tensor.ndim; ++i) count *= tensor.shape[i];
    const auto* base = static_cast<const char*>(tensor.data) + tensor.byte_offset;
    // Walk the strides so a non-compact tensor is read correctly too.
    for (int64_t linear = 0; linear < count; ++linear) {
      int64_t offset = 0, rest = linear;
      for (int32_t d = tensor.ndim - 1; d >= 0; --d) {
        offset += (rest % tensor.shape[d]) * tensor.strides[d];
        rest /= tensor.shape[d];
      }
      sum += reinterpret_cast<const float*>(base)[offset];
    }
  }
  if (managed->deleter != nullptr) managed->deleter(managed);
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SERVER NAME\n", argv[0]);
    return 2;
  }
  tensord::ClientOptions options;
  options.server = argv[1];
  absl::StatusOr<std::unique_ptr<tensord::Client>> client = tensord::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<tensord::Tensor> tensor = (*client)->Fetch(argv[2]);
  if (!tensor.ok()) {
    std::fprintf(stderr, "fetch %s: %s\n", argv[2], tensor.status().ToString().c_str());
    return 1;
  }
  const tensord::TensorInfo info = tensor->info();
  if (info.dtype.code != kDLFloat || info.dtype.bits != 32) {
    std::fprintf(stderr, "%s is not float32\n", argv[2]);
    return 1;
  }
  const double sum = ConsumeAndSum(tensor->release());
  std::printf("%s version %llu: %zu dims, sum %.6g\n", info.name.c_str(),
              static_cast<unsigned long long>(info.version), info.shape.size(), sum);
  return 0;
}
