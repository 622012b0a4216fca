// The CUDA calls the CUDA backend makes, and their errors as absl::Status.
// Compiled only when CMake found CUDA (TENSORD_HAVE_CUDA).
//
// The runtime API comes from cudart_static, which loads libcuda.so.1 itself,
// lazily, on the first call. The few driver-API (cu*) functions are looked up
// at run time through cudaGetDriverEntryPointByVersion, from the very driver
// the runtime loaded. Nothing links libcuda.so, so a binary built with CUDA
// starts on a machine without a driver, where CreateCudaBackend() is
// UNAVAILABLE.
#ifndef TENSORD_SERVICE_DEVICE_CUDA_API_H_
#define TENSORD_SERVICE_DEVICE_CUDA_API_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

// Driver-API entry points; members are named after the cu* functions. The
// types come from cuda.h's declarations (which pick the _v2 variants), and
// the lookup asks for the ABI of the same CUDA_VERSION.
struct CudaDriverApi {
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuMemGetAddressRange) mem_get_address_range = nullptr;
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuMemExportToShareableHandle) mem_export_to_shareable_handle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) mem_import_from_shareable_handle = nullptr;

  // Call after a runtime call succeeded (the runtime has loaded the driver).
  // UNAVAILABLE naming the first symbol the driver does not have.
  static absl::StatusOr<CudaDriverApi> Load();
};

// OK for cudaSuccess, else "<call>: <cudaGetErrorName>: <cudaGetErrorString>"
// with a canonical code (out of memory -> RESOURCE_EXHAUSTED, no driver or
// device -> UNAVAILABLE, bad values -> INVALID_ARGUMENT, ...).
absl::Status CudaRuntimeStatus(cudaError_t error, absl::string_view call);
// The same for a driver-API result, with cuGetErrorName/cuGetErrorString.
absl::Status CudaDriverStatus(const CudaDriverApi& api, CUresult result, absl::string_view call);

// Makes a device current on the calling thread for one scope and gives the
// thread its previous device back on destruction. The backend runs on its
// callers' threads (copies, and DLPack deleters on arbitrary user threads
// that free or close memory): a thread working on cuda:1 that touches a
// cuda:0 tensor must still be on cuda:1 afterwards. When the previous device
// cannot be read, nothing is restored; a failed restore is logged.
//
//   ScopedCudaDevice on_device;
//   TENSORD_RETURN_IF_ERROR(on_device.Enter(device));
class ScopedCudaDevice {
 public:
  ScopedCudaDevice() = default;
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;

  // cudaSetDevice(device), unless it is already current. Call at most once.
  absl::Status Enter(int device);

 private:
  std::optional<int> restore_to_;  // set only when Enter changed the device
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_DEVICE_CUDA_API_H_
