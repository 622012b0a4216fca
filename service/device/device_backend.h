// Device memory behind one interface: allocate on device N, copy with
// streams, export an allocation to another process and import it there.
// Two implementations: CUDA (real GPUs) and simulated (host memory in memfds,
// with CUDA's lifecycle rules), so everything above the backend is tested on
// machines without a GPU. Which one is compiled is chosen in CMake.
#ifndef TENSORD_SERVICE_DEVICE_DEVICE_BACKEND_H_
#define TENSORD_SERVICE_DEVICE_DEVICE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/scoped_fd.h"

namespace tensord {

// How an allocation crosses into another process. An allocation is made for
// exactly one kind (CUDA cannot export cudaMalloc memory as an fd nor VMM
// memory through cudaIpcGetMemHandle), see DeviceBackend::Allocate.
enum class HandleKind : uint8_t {
  // cudaIpcMemHandle_t: 64 opaque bytes covering the whole allocation. CUDA
  // never opens it in the exporting process; a second open in one context
  // only counts a reference, so tensord's rule of one open per process (one
  // close per open, no ambiguity over which close unmaps) is its own.
  // Freeing the allocation while another process has it open is undefined:
  // CUDA keeps nothing alive for the importer.
  kLegacyIpc = 1,
  // CUDA VMM (cuMemCreate) shareable handle: a file descriptor, sent over a
  // Unix socket with SCM_RIGHTS.
  kPosixFd = 2,
};
absl::string_view HandleKindName(HandleKind kind);

// A range of device memory this process can address: an allocation it owns or
// an import of another process's allocation. For the simulated backend the
// address is a host address (tests may memcmp it); for CUDA it is a device
// pointer (UVA).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  int device() const { return device_; }
  uint64_t address() const { return address_; }
  void* data() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(address_)); }
  uint64_t size() const { return size_; }

 protected:
  DeviceMemory(int device, uint64_t address, uint64_t size)
      : device_(device), address_(address), size_(size) {}

 private:
  const int device_;
  const uint64_t address_;
  const uint64_t size_;
};

// Device memory this process owns; freed on destruction. While an
// ExportedHandle of it (its `keepalive`) exists the bytes stay allocated even
// after this object is gone, so an importer never reads freed memory.
class DeviceAllocation : public DeviceMemory {
 public:
  HandleKind exportable_as() const { return exportable_as_; }

 protected:
  DeviceAllocation(int device, uint64_t address, uint64_t size, HandleKind exportable_as)
      : DeviceMemory(device, address, size), exportable_as_(exportable_as) {}

 private:
  const HandleKind exportable_as_;
};

class LegacyIpcClaim;  // device_backend.cc: the once-per-process rule

// What an importer may do with the memory it maps.
enum class ImportAccess : uint8_t {
  kReadWrite,
  // Writes fault (simulated: PROT_READ; CUDA VMM: CU_MEM_ACCESS_FLAGS_PROT_READ).
  // A legacy CUDA IPC handle cannot be opened read-only: there it is advice.
  kReadOnly,
};

// Another process's allocation mapped into this one; unmapped (closed) on
// destruction. Opening is expensive and a legacy handle opens once per
// process: callers cache imports, one per handle.
class ImportedMemory : public DeviceMemory {
 public:
  ~ImportedMemory() override;
  HandleKind kind() const { return kind_; }

 protected:
  ImportedMemory(int device, uint64_t address, uint64_t size, HandleKind kind);

 private:
  friend class DeviceBackend;
  const HandleKind kind_;
  // Released after the derived destructor closed the mapping.
  std::unique_ptr<LegacyIpcClaim> claim_;
};

// What another process needs to import an allocation. Move-only (owns the fd).
struct ExportedHandle {
  HandleKind kind = HandleKind::kLegacyIpc;
  int device = 0;  // the exporter's device ordinal; both sides must number alike
  // kLegacyIpc: the 64 handle bytes. kPosixFd: empty (the fd is the handle).
  std::string bytes;
  // kPosixFd: the shareable fd. The simulated backend sets it for kLegacyIpc
  // too (a memfd cannot be opened from bytes): transports always send a valid
  // fd alongside the bytes with SCM_RIGHTS.
  ScopedFd fd;
  // Where the exported bytes start within the underlying allocation, how many
  // there are, and how big that allocation is (what the importer maps).
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t allocation_size = 0;
  // Exporter side only (null once deserialized elsewhere): holds the
  // allocation's memory until every copy is dropped. Keep it with the lease
  // the handle was sent for; drop it when that lease ends.
  std::shared_ptr<const void> keepalive;
};

// An ordered queue of copies on one device; destroying it lets queued work
// finish (as cudaStreamDestroy does).
class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  int device() const { return device_; }
  // Returns when every copy queued so far on this stream has completed.
  virtual absl::Status Synchronize() = 0;

 protected:
  explicit DeviceStream(int device) : device_(device) {}

 private:
  const int device_;
};

// Page-locked host memory for staging device copies (cudaHostAlloc); freed on
// destruction. Aligned to at least 4096 bytes.
class PinnedBuffer {
 public:
  virtual ~PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  uint64_t size() const { return size_; }

 protected:
  PinnedBuffer(void* data, uint64_t size) : data_(data), size_(size) {}

 private:
  void* const data_;
  const uint64_t size_;
};

struct DeviceMemoryInfo {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

// A DeviceBackend is safe for concurrent use from multiple threads. Objects it
// returns may outlive it. Validation (device ids, sizes, bounds, stream and
// handle kinds) happens here, identically for every implementation, before
// the implementation's Do* method runs.
//
// Copies: with `stream == nullptr` the copy has completed on return (CUDA's
// legacy default stream: it also waits for work queued on other streams of
// the device). With a stream it is only queued: neither the host buffer nor
// the device bytes may be touched or freed until stream->Synchronize(). The
// stream must be on the device of the memory (for device-to-device, of either
// side) and come from this backend.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;

  // "cuda" or "simulated".
  virtual absl::string_view name() const = 0;
  virtual int device_count() const = 0;
  // Whether allocations on `device` can be made exportable as `kind`
  // (kPosixFd needs VMM and POSIX-fd handle support from the driver).
  virtual bool SupportsHandleKind(int device, HandleKind kind) const = 0;
  absl::StatusOr<DeviceMemoryInfo> GetMemoryInfo(int device);

  // `bytes` > 0 on `device`, exportable later as `exportable_as` only.
  // RESOURCE_EXHAUSTED when the device has no room.
  absl::StatusOr<std::unique_ptr<DeviceAllocation>> Allocate(int device, uint64_t bytes,
                                                             HandleKind exportable_as);
  absl::StatusOr<std::unique_ptr<DeviceStream>> CreateStream(int device);
  // Waits for all work on `device`, on every stream.
  absl::Status Synchronize(int device);

  // OUT_OF_RANGE when [offset, offset + bytes) leaves the memory.
  absl::Status CopyHostToDevice(DeviceMemory& dst, uint64_t dst_offset, const void* src,
                                uint64_t bytes, DeviceStream* stream);
  absl::Status CopyDeviceToHost(void* dst, const DeviceMemory& src, uint64_t src_offset,
                                uint64_t bytes, DeviceStream* stream);
  absl::Status CopyDeviceToDevice(DeviceMemory& dst, uint64_t dst_offset, const DeviceMemory& src,
                                  uint64_t src_offset, uint64_t bytes, DeviceStream* stream);

  // A handle another process can Import(). FAILED_PRECONDITION when the
  // allocation was made exportable as another kind. Each call makes a new
  // handle (and fd); its keepalive holds the memory.
  absl::StatusOr<ExportedHandle> Export(const DeviceAllocation& allocation, HandleKind kind);
  // Maps an exported allocation; the result covers [offset, offset + size) of
  // it. A legacy handle already open in this process (an ImportedMemory of it
  // is alive) gives FAILED_PRECONDITION (tensord's once-per-process rule),
  // as does one exported by this very process (CUDA refuses it).
  // `handle.fd` stays the caller's.
  absl::StatusOr<std::unique_ptr<ImportedMemory>> Import(
      const ExportedHandle& handle, ImportAccess access = ImportAccess::kReadWrite);

  // `bytes` > 0 of page-locked host memory.
  absl::StatusOr<std::unique_ptr<PinnedBuffer>> AllocatePinned(uint64_t bytes);

 protected:
  DeviceBackend() = default;

  // Called with validated arguments only.
  virtual absl::StatusOr<DeviceMemoryInfo> DoGetMemoryInfo(int device) = 0;
  virtual absl::StatusOr<std::unique_ptr<DeviceAllocation>> DoAllocate(
      int device, uint64_t bytes, HandleKind exportable_as) = 0;
  virtual absl::StatusOr<std::unique_ptr<DeviceStream>> DoCreateStream(int device) = 0;
  virtual absl::Status DoSynchronize(int device) = 0;
  // `bytes` > 0; `stream` is null or this backend's own.
  virtual absl::Status DoCopy(void* dst, int dst_device, const void* src, int src_device,
                              uint64_t bytes, DeviceStream* stream) = 0;
  virtual absl::StatusOr<ExportedHandle> DoExport(const DeviceAllocation& allocation) = 0;
  virtual absl::StatusOr<std::unique_ptr<ImportedMemory>> DoImport(const ExportedHandle& handle,
                                                                   ImportAccess access) = 0;
  virtual absl::StatusOr<std::unique_ptr<PinnedBuffer>> DoAllocatePinned(uint64_t bytes) = 0;
  // Whether `stream` was created by this backend.
  virtual bool OwnsStream(const DeviceStream& stream) const = 0;
};

// Device id argument of DoCopy for host memory.
inline constexpr int kHostDevice = -1;
// Size of a legacy IPC handle (sizeof(cudaIpcMemHandle_t)).
inline constexpr size_t kLegacyIpcHandleBytes = 64;

// The real backend. UNAVAILABLE, never a crash, when this build has no CUDA,
// when no driver is installed (cudaErrorInsufficientDriver) or when no device
// is visible. A binary built with CUDA starts without libcuda.so.
absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateCudaBackend();

struct SimulatedBackendOptions {
  int device_count = 1;
  // Capacity of each simulated device; memfd pages are only committed when
  // touched, so a large figure costs nothing.
  uint64_t bytes_per_device = uint64_t{16} << 30;
  // Whether kPosixFd (VMM) allocations are offered, to test the fallback.
  bool posix_fd_supported = true;
};
// Host memory in memfds with CUDA's rules: see simulated_backend.cc.
std::unique_ptr<DeviceBackend> CreateSimulatedBackend(const SimulatedBackendOptions& options);
std::unique_ptr<DeviceBackend> CreateSimulatedBackend(int device_count = 1);

}  // namespace tensord

#endif  // TENSORD_SERVICE_DEVICE_DEVICE_BACKEND_H_
