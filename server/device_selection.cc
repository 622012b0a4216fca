#include "server/device_selection.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "service/common/log.h"

namespace tensord {
namespace {

// Simulated devices are memfds; more than this is a typo, not a test.
constexpr int kMaxSimulatedDevices = 64;

}  // namespace

absl::Status CheckDeviceSelection(const DeviceSelection& selection) {
  const std::string& choice = selection.backend;
  if (choice != "cuda" && choice != "auto" && choice != "simulated" && choice != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device-backend=", choice, " is not one of auto, cuda, simulated, none"));
  }
  if (choice == "simulated" &&
      (selection.simulated_devices < 1 || selection.simulated_devices > kMaxSimulatedDevices)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--simulated-devices=", selection.simulated_devices, " is outside 1..",
                     kMaxSimulatedDevices));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<DeviceBackend>> SelectDeviceBackend(
    const DeviceSelection& selection) {
  if (absl::Status checked = CheckDeviceSelection(selection); !checked.ok()) return checked;
  const std::string& choice = selection.backend;
  if (choice == "none") return nullptr;
  if (choice == "simulated") {
    SimulatedBackendOptions options;
    options.device_count = selection.simulated_devices;
    options.bytes_per_device = selection.max_device_bytes;
    options.posix_fd_supported = !selection.simulated_legacy_ipc_only;
    return std::shared_ptr<DeviceBackend>(CreateSimulatedBackend(options));
  }
  absl::StatusOr<std::unique_ptr<DeviceBackend>> cuda = CreateCudaBackend();
  if (cuda.ok()) return std::shared_ptr<DeviceBackend>(std::move(*cuda));
  if (choice == "cuda") {
    return absl::UnavailableError(absl::StrCat("--device-backend=cuda: ", cuda.status().message()));
  }
  Log(LogLevel::kInfo, "device_backend_none",
      {{"reason", cuda.status().message()},
       {"hint", "serving host tensors only; --device-backend=simulated for tests"}});
  return nullptr;
}

}  // namespace tensord
