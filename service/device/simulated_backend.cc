// The simulated device backend: device memory is host memory in a memfd
// mapped MAP_SHARED, so exports really cross processes (the fd travels with
// SCM_RIGHTS), and device pointers are host addresses. It keeps CUDA's rules
// so that code above the backend that would break on a GPU breaks here:
// - a legacy IPC handle opens at most once per process (DeviceBackend::Import)
//   and never in the process that exported it;
// - an allocation is exportable as the one kind chosen at Allocate;
// - exported memory stays allocated while a handle's keepalive exists;
// - copies on a stream are only queued, and run at the stream's (or the
//   device's) Synchronize; a copy without a stream, freeing memory and freeing
//   pinned memory first wait for queued work (as CUDA's legacy default stream,
//   cudaFree and cudaFreeHost do). Reading a D2H staging buffer before
//   synchronizing therefore reads stale bytes here, as it may on a GPU.
// A simulated legacy handle is 64 bytes (magic, exporter pid, allocation id,
// memfd inode) and, since a memfd cannot be opened from bytes, its fd travels
// alongside: transports always send ExportedHandle::fd when it is valid.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"
#include "service/common/mutex.h"
#include "service/common/status_macros.h"
#include "service/device/device_backend.h"

namespace tensord {
namespace {

constexpr uint64_t kPageBytes = 4096;
constexpr char kLegacyMagic[16] = "tensord-sim-ipc";  // 15 chars + NUL

// The 64 bytes of a simulated legacy IPC handle.
struct SimulatedIpcHandle {
  char magic[16];
  uint32_t exporter_pid;
  uint32_t device;
  uint64_t allocation_id;
  uint64_t inode;
  uint64_t file_system;  // st_dev of the memfd
  uint8_t reserved[16];
};
static_assert(sizeof(SimulatedIpcHandle) == kLegacyIpcHandleBytes);

// Unique per process across every simulated backend instance.
std::atomic<uint64_t> next_allocation_id{1};

bool RoundUpToPage(uint64_t bytes, uint64_t* rounded) {
  if (bytes > UINT64_MAX - (kPageBytes - 1)) return false;
  *rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  return true;
}

// Capacity accounting and queued stream work, shared by the backend and
// everything it hands out (which may outlive it).
class SimulatedState {
 public:
  explicit SimulatedState(const SimulatedBackendOptions& options)
      : options_(options), used_bytes_(options_.device_count, 0) {}

  const SimulatedBackendOptions& options() const { return options_; }

  absl::Status Reserve(int device, uint64_t bytes, uint64_t requested) {
    MutexLock lock(&mu_);
    uint64_t free_bytes = options_.bytes_per_device - used_bytes_[device];
    if (bytes > free_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", requested, " bytes on simulated device ", device, ": ",
                       free_bytes, " of ", options_.bytes_per_device, " bytes free"));
    }
    used_bytes_[device] += bytes;
    return absl::OkStatus();
  }
  void Unreserve(int device, uint64_t bytes) {
    MutexLock lock(&mu_);
    used_bytes_[device] -= bytes;
  }
  DeviceMemoryInfo MemoryInfo(int device) {
    MutexLock lock(&mu_);
    return {options_.bytes_per_device, options_.bytes_per_device - used_bytes_[device]};
  }

  uint64_t NewStreamId() {
    MutexLock lock(&mu_);
    return next_stream_id_++;
  }
  void Enqueue(uint64_t stream_id, void* dst, int dst_device, const void* src, int src_device,
               uint64_t bytes) {
    MutexLock lock(&mu_);
    pending_.push_back({stream_id, dst_device, src_device, dst, src, bytes});
  }
  void RunStream(uint64_t stream_id) {
    MutexLock lock(&mu_);
    RunPending([&](const PendingCopy& copy) { return copy.stream_id == stream_id; });
  }
  // Every queued copy touching `device`.
  void RunDevice(int device) {
    MutexLock lock(&mu_);
    RunPending([&](const PendingCopy& copy) {
      return copy.dst_device == device || copy.src_device == device;
    });
  }
  void RunAll() {
    MutexLock lock(&mu_);
    RunPending([](const PendingCopy&) { return true; });
  }
  // A copy on the legacy default stream: after the queued work of its devices.
  void CopyNow(void* dst, int dst_device, const void* src, int src_device, uint64_t bytes) {
    MutexLock lock(&mu_);
    RunPending([&](const PendingCopy& copy) {
      for (int device : {dst_device, src_device}) {
        if (device != kHostDevice && (copy.dst_device == device || copy.src_device == device)) {
          return true;
        }
      }
      return false;
    });
    std::memmove(dst, src, bytes);
  }

 private:
  struct PendingCopy {
    uint64_t stream_id;
    int dst_device;
    int src_device;
    void* dst;
    const void* src;
    uint64_t bytes;
  };
  // Runs the selected copies in queue order (so each stream stays ordered).
  template <typename Predicate>
  void RunPending(Predicate selected) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::deque<PendingCopy> kept;
    for (const PendingCopy& copy : pending_) {
      if (selected(copy)) {
        std::memmove(copy.dst, copy.src, copy.bytes);
      } else {
        kept.push_back(copy);
      }
    }
    pending_.swap(kept);
  }

  const SimulatedBackendOptions options_;
  Mutex mu_;
  std::vector<uint64_t> used_bytes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<PendingCopy> pending_ ABSL_GUARDED_BY(mu_);
};

// One memfd and the exporter's mapping of it; shared by the allocation and the
// keepalive of every handle exported from it.
struct SimulatedBlock {
  std::shared_ptr<SimulatedState> state;
  int device = 0;
  uint64_t id = 0;
  ScopedFd fd;
  uint8_t* data = nullptr;
  uint64_t size = 0;          // requested
  uint64_t mapping_size = 0;  // page-rounded, charged to the device
  struct stat identity {};

  ~SimulatedBlock() {
    if (data != nullptr) ::munmap(data, mapping_size);
    state->Unreserve(device, mapping_size);
  }
};

class SimulatedAllocation final : public DeviceAllocation {
 public:
  SimulatedAllocation(std::shared_ptr<SimulatedBlock> block, HandleKind exportable_as)
      : DeviceAllocation(block->device, reinterpret_cast<uintptr_t>(block->data), block->size,
                         exportable_as),
        block_(std::move(block)) {}
  // Like cudaFree, waits for queued copies that may still touch the bytes.
  ~SimulatedAllocation() override { block_->state->RunDevice(device()); }

  const std::shared_ptr<SimulatedBlock>& block() const { return block_; }

 private:
  std::shared_ptr<SimulatedBlock> block_;
};

class SimulatedImport final : public ImportedMemory {
 public:
  SimulatedImport(std::shared_ptr<SimulatedState> state, int device, uint8_t* mapping,
                  uint64_t mapping_size, uint64_t offset, uint64_t size, HandleKind kind)
      : ImportedMemory(device, reinterpret_cast<uintptr_t>(mapping + offset), size, kind),
        state_(std::move(state)),
        mapping_(mapping),
        mapping_size_(mapping_size) {}
  ~SimulatedImport() override {
    state_->RunDevice(device());
    ::munmap(mapping_, mapping_size_);
  }

 private:
  std::shared_ptr<SimulatedState> state_;
  uint8_t* const mapping_;
  const uint64_t mapping_size_;
};

class SimulatedStream final : public DeviceStream {
 public:
  SimulatedStream(std::shared_ptr<SimulatedState> state, int device)
      : DeviceStream(device), state_(std::move(state)), id_(state_->NewStreamId()) {}
  // Queued work still completes, as after cudaStreamDestroy.
  ~SimulatedStream() override { state_->RunStream(id_); }

  absl::Status Synchronize() override {
    state_->RunStream(id_);
    return absl::OkStatus();
  }
  const SimulatedState* state() const { return state_.get(); }
  uint64_t id() const { return id_; }

 private:
  std::shared_ptr<SimulatedState> state_;
  const uint64_t id_;
};

class SimulatedPinnedBuffer final : public PinnedBuffer {
 public:
  SimulatedPinnedBuffer(std::shared_ptr<SimulatedState> state, void* data, uint64_t size)
      : PinnedBuffer(data, size), state_(std::move(state)) {}
  // Like cudaFreeHost, waits for queued copies first.
  ~SimulatedPinnedBuffer() override {
    state_->RunAll();
    std::free(data());
  }

 private:
  std::shared_ptr<SimulatedState> state_;
};

absl::StatusOr<uint8_t*> MapShared(int fd, uint64_t bytes, absl::string_view what,
                                   ImportAccess access = ImportAccess::kReadWrite) {
  const int protection = access == ImportAccess::kReadOnly ? PROT_READ : PROT_READ | PROT_WRITE;
  void* data = ::mmap(nullptr, bytes, protection, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED)
    return MappingErrnoStatus(errno, absl::StrCat("mmap(", what, ", ", bytes, ")"));
  return static_cast<uint8_t*>(data);
}

class SimulatedBackend final : public DeviceBackend {
 public:
  explicit SimulatedBackend(const SimulatedBackendOptions& options)
      : state_(std::make_shared<SimulatedState>(options)) {}

  absl::string_view name() const override { return "simulated"; }
  int device_count() const override { return state_->options().device_count; }
  bool SupportsHandleKind(int device, HandleKind kind) const override {
    if (device < 0 || device >= device_count()) return false;
    return kind == HandleKind::kLegacyIpc ||
           (kind == HandleKind::kPosixFd && state_->options().posix_fd_supported);
  }

 protected:
  absl::StatusOr<DeviceMemoryInfo> DoGetMemoryInfo(int device) override {
    return state_->MemoryInfo(device);
  }

  absl::StatusOr<std::unique_ptr<DeviceAllocation>> DoAllocate(int device, uint64_t bytes,
                                                               HandleKind exportable_as) override {
    uint64_t mapping_size = 0;
    if (!RoundUpToPage(bytes, &mapping_size) || mapping_size > static_cast<uint64_t>(INT64_MAX)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", bytes, " bytes on simulated device ", device));
    }
    TENSORD_RETURN_IF_ERROR(state_->Reserve(device, mapping_size, bytes));
    auto block = std::make_shared<SimulatedBlock>();
    block->state = state_;
    block->device = device;
    block->mapping_size = mapping_size;  // from here on ~SimulatedBlock unreserves
    block->size = bytes;
    block->id = next_allocation_id.fetch_add(1);
    std::string what = absl::StrCat("tensord-sim-dev", device, "-", block->id);
    block->fd.Reset(::memfd_create(what.c_str(), MFD_CLOEXEC));
    if (!block->fd.valid()) return ErrnoStatus(errno, absl::StrCat("memfd_create(", what, ")"));
    if (::ftruncate(block->fd.get(), static_cast<off_t>(mapping_size)) != 0) {
      return ErrnoStatus(errno, absl::StrCat("ftruncate(", what, ", ", mapping_size, ")"));
    }
    if (::fstat(block->fd.get(), &block->identity) != 0) {
      return ErrnoStatus(errno, absl::StrCat("fstat(", what, ")"));
    }
    TENSORD_ASSIGN_OR_RETURN(block->data, MapShared(block->fd.get(), mapping_size, what));
    return std::make_unique<SimulatedAllocation>(std::move(block), exportable_as);
  }

  absl::StatusOr<std::unique_ptr<DeviceStream>> DoCreateStream(int device) override {
    return std::make_unique<SimulatedStream>(state_, device);
  }

  absl::Status DoSynchronize(int device) override {
    state_->RunDevice(device);
    return absl::OkStatus();
  }

  absl::Status DoCopy(void* dst, int dst_device, const void* src, int src_device, uint64_t bytes,
                      DeviceStream* stream) override {
    if (stream == nullptr) {
      state_->CopyNow(dst, dst_device, src, src_device, bytes);
    } else {
      state_->Enqueue(static_cast<SimulatedStream*>(stream)->id(), dst, dst_device, src, src_device,
                      bytes);
    }
    return absl::OkStatus();
  }

  bool OwnsStream(const DeviceStream& stream) const override {
    auto* simulated = dynamic_cast<const SimulatedStream*>(&stream);
    return simulated != nullptr && simulated->state() == state_.get();
  }

  absl::StatusOr<ExportedHandle> DoExport(const DeviceAllocation& allocation) override {
    auto* simulated = dynamic_cast<const SimulatedAllocation*>(&allocation);
    if (simulated == nullptr || simulated->block()->state != state_) {
      return absl::InvalidArgumentError("the allocation was made by another backend");
    }
    const std::shared_ptr<SimulatedBlock>& block = simulated->block();
    ExportedHandle handle;
    handle.device = block->device;
    handle.fd.Reset(::fcntl(block->fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!handle.fd.valid()) return ErrnoStatus(errno, "fcntl(F_DUPFD_CLOEXEC) of a device memfd");
    if (allocation.exportable_as() == HandleKind::kLegacyIpc) {
      SimulatedIpcHandle bytes{};
      std::memcpy(bytes.magic, kLegacyMagic, sizeof(bytes.magic));
      bytes.exporter_pid = static_cast<uint32_t>(::getpid());
      bytes.device = static_cast<uint32_t>(block->device);
      bytes.allocation_id = block->id;
      bytes.inode = block->identity.st_ino;
      bytes.file_system = block->identity.st_dev;
      handle.bytes.assign(reinterpret_cast<const char*>(&bytes), sizeof(bytes));
    }
    handle.offset = 0;
    handle.size = block->size;
    handle.allocation_size = block->mapping_size;
    handle.keepalive = block;
    return handle;
  }

  absl::StatusOr<std::unique_ptr<ImportedMemory>> DoImport(const ExportedHandle& handle,
                                                           ImportAccess access) override {
    if (handle.kind == HandleKind::kLegacyIpc) {
      TENSORD_RETURN_IF_ERROR(CheckLegacyHandle(handle));
    }
    struct stat file {};
    if (::fstat(handle.fd.get(), &file) != 0) {
      return ErrnoStatus(errno, absl::StrCat("fstat(fd ", handle.fd.get(), " of a device handle)"));
    }
    // Only memfds answer F_GET_SEALS: anything else is not simulated device memory.
    if (!S_ISREG(file.st_mode) || ::fcntl(handle.fd.get(), F_GET_SEALS) < 0 ||
        static_cast<uint64_t>(file.st_size) < handle.allocation_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("fd ", handle.fd.get(), " is not a simulated device allocation of ",
                       handle.allocation_size, " bytes (it has ", file.st_size, ")"));
    }
    if (handle.kind == HandleKind::kLegacyIpc) {
      SimulatedIpcHandle bytes;
      std::memcpy(&bytes, handle.bytes.data(), sizeof(bytes));
      if (bytes.inode != file.st_ino || bytes.file_system != file.st_dev) {
        return absl::InvalidArgumentError(
            absl::StrCat("the fd sent with legacy IPC handle of allocation ", bytes.allocation_id,
                         " belongs to another allocation"));
      }
    }
    TENSORD_ASSIGN_OR_RETURN(uint8_t * mapping, MapShared(handle.fd.get(), handle.allocation_size,
                                                          "imported device memory", access));
    return std::make_unique<SimulatedImport>(state_, handle.device, mapping, handle.allocation_size,
                                             handle.offset, handle.size, handle.kind);
  }

  absl::StatusOr<std::unique_ptr<PinnedBuffer>> DoAllocatePinned(uint64_t bytes) override {
    uint64_t rounded = 0;
    void* data = nullptr;
    if (!RoundUpToPage(bytes, &rounded) ||
        (data = std::aligned_alloc(kPageBytes, rounded)) == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", bytes, " bytes of pinned host memory"));
    }
    return std::make_unique<SimulatedPinnedBuffer>(state_, data, bytes);
  }

 private:
  static absl::Status CheckLegacyHandle(const ExportedHandle& handle) {
    SimulatedIpcHandle bytes;
    std::memcpy(&bytes, handle.bytes.data(), sizeof(bytes));
    if (std::memcmp(bytes.magic, kLegacyMagic, sizeof(bytes.magic)) != 0) {
      return absl::InvalidArgumentError(
          "the legacy IPC handle was not made by a simulated backend");
    }
    if (bytes.exporter_pid == static_cast<uint32_t>(::getpid())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "legacy IPC handle of allocation ", bytes.allocation_id,
          " was exported by this process (pid ", bytes.exporter_pid,
          "): CUDA cannot open a handle in its exporting process; use the allocation itself"));
    }
    if (bytes.device != static_cast<uint32_t>(handle.device)) {
      return absl::InvalidArgumentError(absl::StrCat("legacy IPC handle names device ",
                                                     bytes.device, " but was sent for device ",
                                                     handle.device));
    }
    if (!handle.fd.valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "simulated legacy IPC handle of allocation ", bytes.allocation_id,
          " arrived without its memfd: the transport must send ExportedHandle::fd alongside"));
    }
    return absl::OkStatus();
  }

  std::shared_ptr<SimulatedState> state_;
};

}  // namespace

std::unique_ptr<DeviceBackend> CreateSimulatedBackend(const SimulatedBackendOptions& options) {
  SimulatedBackendOptions checked = options;
  checked.device_count = std::max(checked.device_count, 0);
  return std::make_unique<SimulatedBackend>(checked);
}

}  // namespace tensord
