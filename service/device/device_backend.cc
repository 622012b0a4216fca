#include "service/device/device_backend.h"

#include <unistd.h>

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/common/mutex.h"
#include "service/common/status_macros.h"

namespace tensord {

// A legacy IPC handle is opened at most once per process: this project's rule,
// stricter than CUDA's. (CUDA allows one context per device to open it; a
// second cudaIpcOpenMemHandle in that context is not an error: it counts a
// reference and returns the same pointer.) One open per handle keeps one
// ImportedMemory, and so one cache entry, per mapping. The rule is enforced
// here, process-wide and for every backend, so misuse shows up in simulated
// tests and names the fix.
class LegacyIpcClaim {
 public:
  static absl::StatusOr<std::unique_ptr<LegacyIpcClaim>> Acquire(const std::string& handle_bytes) {
    Registry& registry = GetRegistry();
    MutexLock lock(&registry.mu);
    if (!registry.open.insert(handle_bytes).second) {
      return absl::FailedPreconditionError(absl::StrCat(
          "legacy IPC handle ", absl::BytesToHexString(handle_bytes.substr(0, 16)),
          "... is already open in this process: CUDA opens a handle at most once per process, "
          "so cache the ImportedMemory and reuse it"));
    }
    return std::unique_ptr<LegacyIpcClaim>(new LegacyIpcClaim(handle_bytes));
  }
  ~LegacyIpcClaim() {
    Registry& registry = GetRegistry();
    MutexLock lock(&registry.mu);
    registry.open.erase(handle_bytes_);
  }
  LegacyIpcClaim(const LegacyIpcClaim&) = delete;
  LegacyIpcClaim& operator=(const LegacyIpcClaim&) = delete;

 private:
  struct Registry {
    Mutex mu;
    absl::flat_hash_set<std::string> open ABSL_GUARDED_BY(mu);
  };
  static Registry& GetRegistry() {
    static Registry* registry = new Registry;  // never destroyed: used by exit-time destructors
    return *registry;
  }
  explicit LegacyIpcClaim(std::string handle_bytes) : handle_bytes_(std::move(handle_bytes)) {}

  const std::string handle_bytes_;
};

// Legacy handles exported by this process, while a keepalive of them exists:
// CUDA cannot open a handle in the process that exported it, and saying so
// here gives every backend the same FAILED_PRECONDITION. Entries recorded
// before a fork() belong to the parent and are forgotten in the child.
class LegacyIpcExports {
 public:
  static void Add(const std::string& handle_bytes) {
    State& state = GetState();
    MutexLock lock(&state.mu);
    ForgetIfForked(state);
    ++state.count[handle_bytes];
  }
  static void Remove(const std::string& handle_bytes) {
    State& state = GetState();
    MutexLock lock(&state.mu);
    ForgetIfForked(state);
    auto it = state.count.find(handle_bytes);
    if (it != state.count.end() && --it->second == 0) state.count.erase(it);
  }
  static bool Contains(const std::string& handle_bytes) {
    State& state = GetState();
    MutexLock lock(&state.mu);
    ForgetIfForked(state);
    return state.count.contains(handle_bytes);
  }

 private:
  struct State {
    Mutex mu;
    pid_t pid ABSL_GUARDED_BY(mu) = ::getpid();
    absl::flat_hash_map<std::string, int> count ABSL_GUARDED_BY(mu);
  };
  static State& GetState() {
    static State* state = new State;  // never destroyed: used by exit-time destructors
    return *state;
  }
  static void ForgetIfForked(State& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
    if (state.pid != ::getpid()) {
      state.pid = ::getpid();
      state.count.clear();
    }
  }
};

// What ExportedHandle::keepalive points at: the backend's hold on the memory,
// and the record of a legacy export.
struct ExportHold {
  std::shared_ptr<const void> memory;
  std::string legacy_handle_bytes;  // empty for kPosixFd
  ~ExportHold() {
    if (!legacy_handle_bytes.empty()) LegacyIpcExports::Remove(legacy_handle_bytes);
  }
};

namespace {

absl::Status CheckDevice(int device, int device_count) {
  if (device < 0 || device >= device_count) {
    return absl::InvalidArgumentError(absl::StrCat("device ", device, " does not exist (",
                                                   device_count, " device(s): 0..",
                                                   device_count - 1, ")"));
  }
  return absl::OkStatus();
}

// [offset, offset + bytes) must lie within `memory`, computed without overflow.
absl::Status CheckRange(const DeviceMemory& memory, uint64_t offset, uint64_t bytes,
                        absl::string_view role) {
  if (offset > memory.size() || bytes > memory.size() - offset) {
    return absl::OutOfRangeError(absl::StrCat(role, " range of ", bytes, " bytes at offset ",
                                              offset, " exceeds the ", memory.size(),
                                              "-byte device memory on device ", memory.device()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view HandleKindName(HandleKind kind) {
  switch (kind) {
    case HandleKind::kLegacyIpc: return "legacy-ipc";
    case HandleKind::kPosixFd: return "posix-fd";
  }
  return "unknown";
}

ImportedMemory::ImportedMemory(int device, uint64_t address, uint64_t size, HandleKind kind)
    : DeviceMemory(device, address, size), kind_(kind) {}

ImportedMemory::~ImportedMemory() = default;

absl::StatusOr<DeviceMemoryInfo> DeviceBackend::GetMemoryInfo(int device) {
  TENSORD_RETURN_IF_ERROR(CheckDevice(device, device_count()));
  return DoGetMemoryInfo(device);
}

absl::StatusOr<std::unique_ptr<DeviceAllocation>> DeviceBackend::Allocate(
    int device, uint64_t bytes, HandleKind exportable_as) {
  TENSORD_RETURN_IF_ERROR(CheckDevice(device, device_count()));
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate 0 bytes on device ", device, ": sizes must be > 0"));
  }
  if (!SupportsHandleKind(device, exportable_as)) {
    return absl::FailedPreconditionError(absl::StrCat(name(), " device ", device,
                                                      " cannot make memory exportable as ",
                                                      HandleKindName(exportable_as)));
  }
  return DoAllocate(device, bytes, exportable_as);
}

absl::StatusOr<std::unique_ptr<DeviceStream>> DeviceBackend::CreateStream(int device) {
  TENSORD_RETURN_IF_ERROR(CheckDevice(device, device_count()));
  return DoCreateStream(device);
}

absl::Status DeviceBackend::Synchronize(int device) {
  TENSORD_RETURN_IF_ERROR(CheckDevice(device, device_count()));
  return DoSynchronize(device);
}

namespace {

absl::Status CheckStream(const DeviceStream* stream, bool owned, int device_a, int device_b) {
  if (stream == nullptr) return absl::OkStatus();
  if (!owned) return absl::InvalidArgumentError("the stream was created by another backend");
  if (stream->device() != device_a && stream->device() != device_b) {
    return absl::InvalidArgumentError(absl::StrCat("a stream of device ", stream->device(),
                                                   " cannot copy memory of device ", device_a));
  }
  return absl::OkStatus();
}

absl::Status CheckHostPointer(const void* pointer, uint64_t bytes, absl::string_view role) {
  if (pointer == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", role, " pointer is null for a copy of ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

uint8_t* At(const DeviceMemory& memory, uint64_t offset) {
  return static_cast<uint8_t*>(memory.data()) + offset;
}

}  // namespace

absl::Status DeviceBackend::CopyHostToDevice(DeviceMemory& dst, uint64_t dst_offset,
                                             const void* src, uint64_t bytes,
                                             DeviceStream* stream) {
  TENSORD_RETURN_IF_ERROR(CheckRange(dst, dst_offset, bytes, "destination"));
  TENSORD_RETURN_IF_ERROR(CheckHostPointer(src, bytes, "source"));
  TENSORD_RETURN_IF_ERROR(
      CheckStream(stream, stream && OwnsStream(*stream), dst.device(), dst.device()));
  if (bytes == 0) return absl::OkStatus();
  return DoCopy(At(dst, dst_offset), dst.device(), src, kHostDevice, bytes, stream);
}

absl::Status DeviceBackend::CopyDeviceToHost(void* dst, const DeviceMemory& src,
                                             uint64_t src_offset, uint64_t bytes,
                                             DeviceStream* stream) {
  TENSORD_RETURN_IF_ERROR(CheckRange(src, src_offset, bytes, "source"));
  TENSORD_RETURN_IF_ERROR(CheckHostPointer(dst, bytes, "destination"));
  TENSORD_RETURN_IF_ERROR(
      CheckStream(stream, stream && OwnsStream(*stream), src.device(), src.device()));
  if (bytes == 0) return absl::OkStatus();
  return DoCopy(dst, kHostDevice, At(src, src_offset), src.device(), bytes, stream);
}

absl::Status DeviceBackend::CopyDeviceToDevice(DeviceMemory& dst, uint64_t dst_offset,
                                               const DeviceMemory& src, uint64_t src_offset,
                                               uint64_t bytes, DeviceStream* stream) {
  TENSORD_RETURN_IF_ERROR(CheckRange(dst, dst_offset, bytes, "destination"));
  TENSORD_RETURN_IF_ERROR(CheckRange(src, src_offset, bytes, "source"));
  TENSORD_RETURN_IF_ERROR(
      CheckStream(stream, stream && OwnsStream(*stream), dst.device(), src.device()));
  if (bytes == 0) return absl::OkStatus();
  return DoCopy(At(dst, dst_offset), dst.device(), At(src, src_offset), src.device(), bytes,
                stream);
}

absl::StatusOr<ExportedHandle> DeviceBackend::Export(const DeviceAllocation& allocation,
                                                     HandleKind kind) {
  if (allocation.exportable_as() != kind) {
    return absl::FailedPreconditionError(
        absl::StrCat("the ", allocation.size(), "-byte allocation on device ", allocation.device(),
                     " was made exportable as ", HandleKindName(allocation.exportable_as()),
                     ", not as ", HandleKindName(kind), " (choose the kind at Allocate)"));
  }
  TENSORD_ASSIGN_OR_RETURN(ExportedHandle handle, DoExport(allocation));
  handle.kind = kind;
  auto hold = std::make_shared<ExportHold>();
  hold->memory = std::move(handle.keepalive);
  if (kind == HandleKind::kLegacyIpc) {
    hold->legacy_handle_bytes = handle.bytes;
    LegacyIpcExports::Add(handle.bytes);
  }
  handle.keepalive = std::move(hold);
  return handle;
}

absl::StatusOr<std::unique_ptr<ImportedMemory>> DeviceBackend::Import(const ExportedHandle& handle,
                                                                      ImportAccess access) {
  TENSORD_RETURN_IF_ERROR(CheckDevice(handle.device, device_count()));
  if (handle.kind != HandleKind::kLegacyIpc && handle.kind != HandleKind::kPosixFd) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown handle kind ", static_cast<int>(handle.kind)));
  }
  if (handle.size == 0 || handle.offset > handle.allocation_size ||
      handle.size > handle.allocation_size - handle.offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("handle range of ", handle.size, " bytes at offset ", handle.offset,
                     " does not fit a non-empty allocation of ", handle.allocation_size, " bytes"));
  }
  if (!SupportsHandleKind(handle.device, handle.kind)) {
    return absl::FailedPreconditionError(absl::StrCat(name(), " device ", handle.device,
                                                      " cannot import ",
                                                      HandleKindName(handle.kind), " handles"));
  }
  std::unique_ptr<LegacyIpcClaim> claim;
  if (handle.kind == HandleKind::kLegacyIpc) {
    if (handle.bytes.size() != kLegacyIpcHandleBytes) {
      return absl::InvalidArgumentError(absl::StrCat("legacy IPC handle has ", handle.bytes.size(),
                                                     " bytes, not ", kLegacyIpcHandleBytes));
    }
    if (LegacyIpcExports::Contains(handle.bytes)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "legacy IPC handle ", absl::BytesToHexString(handle.bytes.substr(0, 16)),
          "... was exported by this process: CUDA cannot open a handle in its exporting "
          "process; use the allocation itself"));
    }
    TENSORD_ASSIGN_OR_RETURN(claim, LegacyIpcClaim::Acquire(handle.bytes));
  } else if (!handle.fd.valid()) {
    return absl::InvalidArgumentError("posix-fd handle carries no file descriptor");
  }
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<ImportedMemory> imported, DoImport(handle, access));
  imported->claim_ = std::move(claim);
  return imported;
}

absl::StatusOr<std::unique_ptr<PinnedBuffer>> DeviceBackend::AllocatePinned(uint64_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("cannot allocate 0 bytes of pinned host memory");
  }
  return DoAllocatePinned(bytes);
}

std::unique_ptr<DeviceBackend> CreateSimulatedBackend(int device_count) {
  SimulatedBackendOptions options;
  options.device_count = device_count;
  return CreateSimulatedBackend(options);
}

}  // namespace tensord
