// CreateCudaBackend() for builds without CUDA (CMake chose this file instead
// of cuda_backend.cc because no nvcc was found or TENSORD_CUDA=OFF).
#include "service/device/device_backend.h"

namespace tensord {

absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateCudaBackend() {
  return absl::UnavailableError(
      "no CUDA device backend: tensord was built without CUDA (TENSORD_CUDA=OFF or no nvcc)");
}

}  // namespace tensord
