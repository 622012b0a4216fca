// Device tensors over gRPC: a put into device memory (host-to-device staged
// through pinned buffers on the server) and a fetch of it (device-to-host
// staged), against raw TCP of the same bytes and against the device copy
// itself, measured in the same rounds. Runs when tensord has a device
// backend (--device-backend: cuda on a GPU host, simulated anywhere).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/baselines.h"
#include "bench/cases.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/device/device_backend.h"

namespace tensord::bench {
namespace {

constexpr char kRawTcp[] = "raw TCP, same bytes";

// The bench's own backend of the server's kind, for the device-copy
// baseline; null (baseline rows skipped) when it cannot be opened here.
std::unique_ptr<DeviceBackend> OpenBaselineBackend(const std::string& kind) {
  if (kind == "simulated") return CreateSimulatedBackend(1);
  absl::StatusOr<std::unique_ptr<DeviceBackend>> cuda = CreateCudaBackend();
  return cuda.ok() ? *std::move(cuda) : nullptr;
}

// One device-to-host or host-to-device copy of `bytes` through pinned
// memory, synchronous: what the server's staging is built from.
struct DeviceCopyLink {
  std::unique_ptr<DeviceAllocation> memory;
  std::unique_ptr<PinnedBuffer> pinned;
};

absl::StatusOr<DeviceCopyLink> OpenDeviceCopyLink(DeviceBackend& backend, uint64_t bytes) {
  DeviceCopyLink link;
  TENSORD_ASSIGN_OR_RETURN(link.memory, backend.Allocate(0, bytes, HandleKind::kLegacyIpc));
  TENSORD_ASSIGN_OR_RETURN(link.pinned, backend.AllocatePinned(bytes));
  return link;
}

// A local fetch of a device tensor timed up to the returned tensor: its
// device and size are checked, and on the simulated backend (host memory)
// its bytes at spot offsets too; the release is not timed.
absl::StatusOr<double> TimedLocalDeviceFetch(Client& client, const std::string& name,
                                             uint64_t version, uint64_t bytes, bool simulated) {
  FetchOptions options;
  options.version = version;
  const Clock::time_point start = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(Tensor tensor, client.Fetch(name, options));
  const double seconds = SecondsSince(start);
  if (tensor.dl_tensor().device.device_type != kDLCUDA || tensor.data_bytes() != bytes) {
    return absl::DataLossError(absl::StrCat("local fetch of device tensor ", name, " gave ",
                                            tensor.data_bytes(), " bytes on device type ",
                                            tensor.dl_tensor().device.device_type));
  }
  if (simulated) {
    TENSORD_RETURN_IF_ERROR(CheckPattern(tensor.dl_tensor().data, bytes, kPatternSeed,
                                         absl::StrCat("local fetch of device tensor ", name)));
  }
  return seconds;
}

void AddLatencyRow(const BenchEnv& env, const std::string& name, uint64_t bytes,
                   const std::vector<double>& samples, std::string note) {
  env.report.Add({.section = kDeviceSection,
                  .name = name,
                  .bytes = bytes,
                  .value = Median(samples) * 1e6,
                  .unit = "us",
                  .note = absl::StrFormat("median of %d, p99 %.1f us; %s", samples.size(),
                                          Percentile(samples, 99) * 1e6, note)});
}

void AddRow(const BenchEnv& env, const std::string& name, uint64_t bytes,
            const std::vector<double>& samples, std::optional<double> baseline_gbps,
            const std::string& baseline, std::string note) {
  const double gbps = GigabytesPerSecond(bytes, Median(samples));
  Row row{.section = kDeviceSection,
          .name = name,
          .bytes = bytes,
          .value = gbps,
          .unit = "GB/s",
          .note = absl::StrCat("median of ", samples.size(), note.empty() ? "" : "; ", note)};
  if (baseline_gbps.has_value()) {
    row.ratio = gbps / *baseline_gbps;
    row.baseline = baseline;
  }
  env.report.Add(std::move(row));
}

}  // namespace

absl::Status RunDeviceSection(const BenchEnv& env) {
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                           ConnectClient(env, TransferPath::kRemote));
  const DLDevice device{kDLCUDA, 0};
  // A first small put tells whether the server has a device at all.
  {
    const int64_t shape = 16;
    PutOptions options;
    options.device = device;
    absl::StatusOr<TensorInfo> probe =
        client->Put("bench/device/probe", ByteTensor(env.source.data(), &shape), options);
    if (absl::IsFailedPrecondition(probe.status())) {
      env.report.Add({.section = kDeviceSection,
                      .name = "skipped: tensord has no device",
                      .unit = "-",
                      .note = absl::StrCat("--device-backend=", env.device_backend, ": ",
                                           probe.status().message())});
      return absl::OkStatus();
    }
    TENSORD_RETURN_IF_ERROR(probe.status());
    TENSORD_RETURN_IF_ERROR(client->Delete("bench/device/probe").status());
  }
  std::unique_ptr<DeviceBackend> backend = OpenBaselineBackend(env.device_backend);

  // Local GPU handoff (lease, IPC handle or VMM fd over the handoff socket,
  // import once per process) when this host can reach the socket.
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> local_client,
                           ConnectClient(env, TransferPath::kAuto));
  const bool simulated = env.device_backend == "simulated";
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<RawTcpLink> link,
                           RawTcpLink::Open(env.source, env.destination));
  for (uint64_t bytes : env.config.device_sizes) {
    const std::string name = TensorName("device", bytes);
    const int64_t shape = static_cast<int64_t>(bytes);
    const DLTensor source = ByteTensor(env.source.data(), &shape);
    std::optional<DeviceCopyLink> copy_link;
    if (backend != nullptr) {
      TENSORD_ASSIGN_OR_RETURN(copy_link, OpenDeviceCopyLink(*backend, bytes));
      TENSORD_RETURN_IF_ERROR(
          backend->CopyHostToDevice(*copy_link->memory, 0, env.source.data(), bytes, nullptr));
    }
    PutOptions put_options;
    put_options.device = device;
    {
      TENSORD_ASSIGN_OR_RETURN(TensorInfo stored, client->Put(name, source, put_options));
      if (stored.total_bytes != bytes || stored.device.device_type != kDLCUDA) {
        return absl::DataLossError(absl::StrCat("device put of ", bytes, " bytes stored ",
                                                stored.total_bytes, " bytes on device type ",
                                                stored.device.device_type));
      }
    }

    enum Case { kRaw, kFetch, kPut, kDeviceToHost, kHostToDevice };
    std::vector<TimedRun> cases = {
        [&] { return TimedRawTransfer(env, *link, bytes); },
        [&] {
          ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
          return TimedFetchInto(env, *client, name, bytes);
        },
        [&]() -> absl::StatusOr<double> {
          const Clock::time_point start = Clock::now();
          TENSORD_ASSIGN_OR_RETURN(TensorInfo info, client->Put(name, source, put_options));
          const double seconds = SecondsSince(start);
          if (info.total_bytes != bytes) {
            return absl::DataLossError(
                absl::StrCat("device put of ", bytes, " bytes stored ", info.total_bytes));
          }
          return seconds;
        }};
    if (copy_link.has_value()) {
      cases.push_back([&]() -> absl::StatusOr<double> {
        const Clock::time_point start = Clock::now();
        TENSORD_RETURN_IF_ERROR(backend->CopyDeviceToHost(copy_link->pinned->data(),
                                                          *copy_link->memory, 0, bytes, nullptr));
        return SecondsSince(start);
      });
      cases.push_back([&]() -> absl::StatusOr<double> {
        const Clock::time_point start = Clock::now();
        TENSORD_RETURN_IF_ERROR(backend->CopyHostToDevice(
            *copy_link->memory, 0, copy_link->pinned->data(), bytes, nullptr));
        return SecondsSince(start);
      });
    }
    TENSORD_ASSIGN_OR_RETURN(std::vector<std::vector<double>> samples,
                             RepeatInterleaved(env.config.transfer_policy(bytes), cases));
    const double raw_gbps = GigabytesPerSecond(bytes, Median(samples[kRaw]));
    AddRow(env, "raw TCP 127.0.0.1, 1 MiB send/recv", bytes, samples[kRaw], std::nullopt, "",
           "the network baseline of this section");
    std::optional<double> d2h_gbps, h2d_gbps;
    if (copy_link.has_value()) {
      d2h_gbps = GigabytesPerSecond(bytes, Median(samples[kDeviceToHost]));
      h2d_gbps = GigabytesPerSecond(bytes, Median(samples[kHostToDevice]));
      AddRow(env, absl::StrCat("device-to-host copy, pinned (", backend->name(), ")"), bytes,
             samples[kDeviceToHost], std::nullopt, "", "one synchronous copy, this process");
      AddRow(env, absl::StrCat("host-to-device copy, pinned (", backend->name(), ")"), bytes,
             samples[kHostToDevice], std::nullopt, "", "one synchronous copy, this process");
    }
    const auto versus = [&](const std::vector<double>& run, std::optional<double> copy_gbps,
                            const char* copy) -> std::string {
      if (!copy_gbps.has_value()) return "";
      return absl::StrFormat("; %.3fx the %s copy",
                             GigabytesPerSecond(bytes, Median(run)) / *copy_gbps, copy);
    };
    AddRow(env, "fetch of a device tensor (FetchInto)", bytes, samples[kFetch], raw_gbps, kRawTcp,
           absl::StrCat("D2H staged on the server",
                        versus(samples[kFetch], d2h_gbps, "device-to-host")));
    AddRow(env, "put into device memory", bytes, samples[kPut], raw_gbps, kRawTcp,
           absl::StrCat("H2D staged on the server",
                        versus(samples[kPut], h2d_gbps, "host-to-device")));
    if (local_client->local()) {
      TENSORD_ASSIGN_OR_RETURN(TensorInfo latest, client->Stat(name));
      const uint64_t version = latest.version;
      TENSORD_ASSIGN_OR_RETURN(std::vector<double> cold, Repeat(env.config.latency_policy, [&] {
                                 return TimedLocalDeviceFetch(*local_client, name, version, bytes,
                                                              simulated);
                               }));
      AddLatencyRow(env, "local handoff, cold", bytes, cold,
                    "no tensor of the version alive: lease + IPC handle/fd + import");
      FetchOptions at_version;
      at_version.version = version;
      TENSORD_ASSIGN_OR_RETURN(Tensor keeper, local_client->Fetch(name, at_version));
      TENSORD_ASSIGN_OR_RETURN(std::vector<double> cached, Repeat(env.config.latency_policy, [&] {
                                 return TimedLocalDeviceFetch(*local_client, name, version, bytes,
                                                              simulated);
                               }));
      AddLatencyRow(env, "local handoff, cached", bytes, cached,
                    "version held: no round trip, the process's one import");
    }
    // What the last put stored must be the source, byte for byte.
    TENSORD_ASSIGN_OR_RETURN(TensorInfo stored, client->Stat(name));
    if (stored.crc32c != Crc32c(env.source.data(), bytes)) {
      return absl::DataLossError(absl::StrCat("device put of ", bytes, " bytes stored crc32c ",
                                              stored.crc32c, ", not the source's"));
    }
    TENSORD_RETURN_IF_ERROR(client->Delete(name).status());
  }
  return absl::OkStatus();
}

}  // namespace tensord::bench
