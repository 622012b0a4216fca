#include "service/device/cuda_api.h"

#include "absl/strings/str_cat.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

// `symbol` is the driver function's base name (no _v2 suffix): the lookup
// picks the variant matching the headers' CUDA_VERSION.
template <typename Function>
absl::Status LoadEntryPoint(const char* symbol, Function* function) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t error =
      cudaGetDriverEntryPointByVersion(symbol, &address, CUDA_VERSION, cudaEnableDefault, &found);
  if (error != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("cudaGetDriverEntryPointByVersion(", symbol,
                                               "): ", cudaGetErrorName(error), ": ",
                                               cudaGetErrorString(error)));
  }
  if (found != cudaDriverEntryPointSuccess || address == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("the CUDA driver has no ", symbol, " for CUDA ", CUDA_VERSION,
                     found == cudaDriverEntryPointVersionNotSufficent ? " (driver too old)" : ""));
  }
  *function = reinterpret_cast<Function>(address);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CudaDriverApi> CudaDriverApi::Load() {
  CudaDriverApi api;
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuGetErrorName", &api.get_error_name));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuGetErrorString", &api.get_error_string));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuDeviceGet", &api.device_get));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuDeviceGetAttribute", &api.device_get_attribute));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuMemGetAddressRange", &api.mem_get_address_range));
  TENSORD_RETURN_IF_ERROR(
      LoadEntryPoint("cuMemGetAllocationGranularity", &api.mem_get_allocation_granularity));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuMemCreate", &api.mem_create));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuMemRelease", &api.mem_release));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuMemAddressReserve", &api.mem_address_reserve));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuMemAddressFree", &api.mem_address_free));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuMemMap", &api.mem_map));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuMemUnmap", &api.mem_unmap));
  TENSORD_RETURN_IF_ERROR(LoadEntryPoint("cuMemSetAccess", &api.mem_set_access));
  TENSORD_RETURN_IF_ERROR(
      LoadEntryPoint("cuMemExportToShareableHandle", &api.mem_export_to_shareable_handle));
  TENSORD_RETURN_IF_ERROR(
      LoadEntryPoint("cuMemImportFromShareableHandle", &api.mem_import_from_shareable_handle));
  return api;
}

absl::Status CudaRuntimeStatus(cudaError_t error, absl::string_view call) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message =
      absl::StrCat(call, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorMemoryAllocation: return absl::ResourceExhaustedError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidMemcpyDirection: return absl::InvalidArgumentError(message);
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice: return absl::UnavailableError(message);
    case cudaErrorNotSupported: return absl::UnimplementedError(message);
    case cudaErrorNotPermitted: return absl::PermissionDeniedError(message);
    // An open of a legacy IPC handle in its exporting process, or a mapping the
    // driver could not make. (A second open in the same context is not an
    // error: CUDA counts a reference and returns the same pointer.)
    case cudaErrorAlreadyMapped:
    case cudaErrorDeviceUninitialized:
    case cudaErrorMapBufferObjectFailed: return absl::FailedPreconditionError(message);
    default: return absl::InternalError(message);
  }
}

absl::Status CudaDriverStatus(const CudaDriverApi& api, CUresult result, absl::string_view call) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.get_error_name != nullptr) api.get_error_name(result, &name);
  if (api.get_error_string != nullptr) api.get_error_string(result, &text);
  std::string message =
      absl::StrCat(call, ": ", name != nullptr ? name : "CUresult", " (", static_cast<int>(result),
                   "): ", text != nullptr ? text : "unknown error");
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: return absl::ResourceExhaustedError(message);
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_HANDLE: return absl::InvalidArgumentError(message);
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return absl::UnavailableError(message);
    case CUDA_ERROR_NOT_SUPPORTED: return absl::UnimplementedError(message);
    case CUDA_ERROR_NOT_PERMITTED: return absl::PermissionDeniedError(message);
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_ALREADY_MAPPED: return absl::FailedPreconditionError(message);
    default: return absl::InternalError(message);
  }
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (!restore_to_.has_value()) return;
  absl::Status status = CudaRuntimeStatus(cudaSetDevice(*restore_to_),
                                          absl::StrCat("cudaSetDevice(", *restore_to_, ")"));
  if (!status.ok()) {
    Log(LogLevel::kWarning, "cuda_restore_device_failed", {{"error", status.message()}});
  }
}

absl::Status ScopedCudaDevice::Enter(int device) {
  int previous = 0;
  const bool saved = cudaGetDevice(&previous) == cudaSuccess;
  // Skipping the no-op set also avoids a restore that could fail.
  if (saved && previous == device) return absl::OkStatus();
  TENSORD_RETURN_IF_ERROR(
      CudaRuntimeStatus(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")")));
  if (saved) restore_to_ = previous;
  return absl::OkStatus();
}

}  // namespace tensord
