// --device-backend: which DeviceBackend (if any) holds kDLCUDA tensors.
#ifndef TENSORD_SERVER_DEVICE_SELECTION_H_
#define TENSORD_SERVER_DEVICE_SELECTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/device/device_backend.h"

namespace tensord {

struct DeviceSelection {
  // "auto", "cuda", "simulated" or "none".
  std::string backend = "auto";
  int simulated_devices = 1;
  // Simulated devices without kPosixFd (VMM) handles.
  bool simulated_legacy_ipc_only = false;
  // Per-device capacity; also the size of each simulated device.
  uint64_t max_device_bytes = uint64_t{8} << 30;
};

// INVALID_ARGUMENT naming a backend that is not one of the four, or a
// simulated device count outside 1..64.
absl::Status CheckDeviceSelection(const DeviceSelection& selection);

// The chosen backend, or null for none. "auto" takes CUDA when it finds a
// device and otherwise none, logging why; "cuda" fails (UNAVAILABLE) where
// "auto" would fall back. INVALID_ARGUMENT: as CheckDeviceSelection.
absl::StatusOr<std::shared_ptr<DeviceBackend>> SelectDeviceBackend(
    const DeviceSelection& selection);

}  // namespace tensord

#endif  // TENSORD_SERVER_DEVICE_SELECTION_H_
