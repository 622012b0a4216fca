// The CUDA device backend. Compiled only when CMake found CUDA; otherwise
// cuda_backend_unavailable.cc provides CreateCudaBackend().
//
// kLegacyIpc allocations come from cudaMalloc and travel as a
// cudaIpcMemHandle_t, which covers the whole allocation: the handle also
// carries the pointer's offset from the allocation base (cuMemGetAddressRange).
// kPosixFd allocations come from VMM (cuMemCreate with a POSIX-fd handle type,
// mapped with cuMemAddressReserve/cuMemMap/cuMemSetAccess) and travel as the
// fd of cuMemExportToShareableHandle. Every resource is released in reverse
// order of acquisition by an RAII owner. Every call that needs a current
// device runs under a ScopedCudaDevice, so the caller's thread keeps its own.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/device/cuda_api.h"
#include "service/device/device_backend.h"

namespace tensord {
namespace {

// Whether the driver library the runtime loads is there at all (tells "no
// driver" from "a driver too old for this runtime", which CUDA reports alike).
bool DriverLibraryLoadable() {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

struct CudaDeviceInfo {
  bool posix_fd_supported = false;  // VMM and POSIX-fd shareable handles
  size_t granularity = 0;           // VMM minimum granularity, when supported
};

// What the backend and every object it hands out share.
struct CudaShared {
  CudaDriverApi api;
  std::vector<CudaDeviceInfo> devices;
};

// Cleanup paths cannot return errors: log them.
void LogIfError(const absl::Status& status) {
  if (!status.ok()) Log(LogLevel::kWarning, "cuda_release_failed", {{"error", status.message()}});
}

CUmemAllocationProp VmmProperties(int device) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// A VMM mapping: a reserved range, optionally with memory mapped into it.
// Unmapped and unreserved on destruction; the physical handle is separate.
class VmmMapping {
 public:
  VmmMapping(std::shared_ptr<CudaShared> shared, CUdeviceptr address, size_t size)
      : shared_(std::move(shared)), address_(address), size_(size) {}
  ~VmmMapping() {
    const CudaDriverApi& api = shared_->api;
    if (mapped_) {
      LogIfError(CudaDriverStatus(api, api.mem_unmap(address_, size_), "cuMemUnmap"));
    }
    LogIfError(CudaDriverStatus(api, api.mem_address_free(address_, size_), "cuMemAddressFree"));
  }
  VmmMapping(const VmmMapping&) = delete;
  VmmMapping& operator=(const VmmMapping&) = delete;

  static absl::StatusOr<std::unique_ptr<VmmMapping>> Create(
      std::shared_ptr<CudaShared> shared, int device, CUmemGenericAllocationHandle memory,
      size_t size, ImportAccess granted = ImportAccess::kReadWrite) {
    const CudaDriverApi& api = shared->api;
    CUdeviceptr address = 0;
    TENSORD_RETURN_IF_ERROR(CudaDriverStatus(api, api.mem_address_reserve(&address, size, 0, 0, 0),
                                             absl::StrCat("cuMemAddressReserve(", size, ")")));
    auto mapping = std::make_unique<VmmMapping>(std::move(shared), address, size);
    TENSORD_RETURN_IF_ERROR(CudaDriverStatus(api, api.mem_map(address, size, 0, memory, 0),
                                             absl::StrCat("cuMemMap(", size, ")")));
    mapping->mapped_ = true;
    CUmemAccessDesc access;
    std::memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = granted == ImportAccess::kReadOnly ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                                      : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    TENSORD_RETURN_IF_ERROR(
        CudaDriverStatus(api, api.mem_set_access(address, size, &access, 1),
                         absl::StrCat("cuMemSetAccess(", size, " bytes, device ", device, ")")));
    return mapping;
  }

  CUdeviceptr address() const { return address_; }

 private:
  std::shared_ptr<CudaShared> shared_;
  const CUdeviceptr address_;
  const size_t size_;
  bool mapped_ = false;
};

// A cuMemCreate handle, released on destruction (mappings hold their own
// reference, so releasing it early is allowed).
class VmmMemory {
 public:
  VmmMemory(std::shared_ptr<CudaShared> shared, CUmemGenericAllocationHandle handle)
      : shared_(std::move(shared)), handle_(handle) {}
  ~VmmMemory() {
    LogIfError(CudaDriverStatus(shared_->api, shared_->api.mem_release(handle_), "cuMemRelease"));
  }
  VmmMemory(const VmmMemory&) = delete;
  VmmMemory& operator=(const VmmMemory&) = delete;
  CUmemGenericAllocationHandle handle() const { return handle_; }

 private:
  std::shared_ptr<CudaShared> shared_;
  const CUmemGenericAllocationHandle handle_;
};

// The memory of one allocation, shared by the allocation and the keepalive of
// each handle exported from it: freed when the last of them is gone.
struct CudaBlock {
  std::shared_ptr<CudaShared> shared;
  int device = 0;
  uint64_t size = 0;
  // kLegacyIpc: cudaMalloc memory.
  void* malloc_pointer = nullptr;
  // kPosixFd: VMM memory (mapping released before the memory).
  uint64_t vmm_size = 0;
  std::unique_ptr<VmmMemory> vmm_memory;
  std::unique_ptr<VmmMapping> vmm_mapping;

  uint64_t address() const {
    return malloc_pointer != nullptr ? reinterpret_cast<uintptr_t>(malloc_pointer)
                                     : vmm_mapping->address();
  }
  // Runs wherever the last owner is dropped, often a DLPack deleter on a user
  // thread.
  ~CudaBlock() {
    ScopedCudaDevice on_device;
    LogIfError(on_device.Enter(device));
    if (malloc_pointer != nullptr) {
      LogIfError(CudaRuntimeStatus(cudaFree(malloc_pointer), "cudaFree"));
    }
    vmm_mapping.reset();
    vmm_memory.reset();
  }
};

class CudaAllocation final : public DeviceAllocation {
 public:
  CudaAllocation(std::shared_ptr<CudaBlock> block, HandleKind kind)
      : DeviceAllocation(block->device, block->address(), block->size, kind),
        block_(std::move(block)) {}
  const std::shared_ptr<CudaBlock>& block() const { return block_; }

 private:
  std::shared_ptr<CudaBlock> block_;
};

// What cudaIpcOpenMemHandle returned: the whole exported allocation, mapped
// on `device`. Closed on destruction, which may run in a DLPack deleter on
// any thread.
class LegacyIpcMapping {
 public:
  LegacyIpcMapping(int device, void* base) : device_(device), base_(base) {}
  ~LegacyIpcMapping() {
    ScopedCudaDevice on_device;
    LogIfError(on_device.Enter(device_));
    LogIfError(CudaRuntimeStatus(cudaIpcCloseMemHandle(base_),
                                 absl::StrCat("cudaIpcCloseMemHandle(device ", device_, ")")));
  }
  LegacyIpcMapping(const LegacyIpcMapping&) = delete;
  LegacyIpcMapping& operator=(const LegacyIpcMapping&) = delete;

  int device() const { return device_; }
  uint64_t base() const { return reinterpret_cast<uintptr_t>(base_); }

 private:
  const int device_;
  void* const base_;
};

// The mapping is a member, so it is closed before ImportedMemory releases
// the legacy claim.
class CudaLegacyImport final : public ImportedMemory {
 public:
  CudaLegacyImport(std::unique_ptr<LegacyIpcMapping> mapping, uint64_t offset, uint64_t size)
      : ImportedMemory(mapping->device(), mapping->base() + offset, size, HandleKind::kLegacyIpc),
        mapping_(std::move(mapping)) {}

 private:
  std::unique_ptr<LegacyIpcMapping> mapping_;
};

class CudaVmmImport final : public ImportedMemory {
 public:
  CudaVmmImport(int device, std::unique_ptr<VmmMapping> mapping, uint64_t offset, uint64_t size)
      : ImportedMemory(device, mapping->address() + offset, size, HandleKind::kPosixFd),
        mapping_(std::move(mapping)) {}
  // Unmaps on the mapping's device, as the import mapped it, wherever the
  // last reference is dropped.
  ~CudaVmmImport() override {
    ScopedCudaDevice on_device;
    LogIfError(on_device.Enter(device()));
    mapping_.reset();
  }

 private:
  std::unique_ptr<VmmMapping> mapping_;
};

// The exporter's offset, size and allocation_size are untrusted: a tensor
// built from them must stay within what cudaIpcOpenMemHandle actually mapped.
absl::Status CheckLegacyImportFits(const CudaDriverApi& api, const ExportedHandle& handle,
                                   const LegacyIpcMapping& mapping) {
  CUdeviceptr range_base = 0;
  size_t range_size = 0;
  TENSORD_RETURN_IF_ERROR(CudaDriverStatus(
      api, api.mem_get_address_range(&range_base, &range_size, mapping.base()),
      absl::StrCat("cuMemGetAddressRange(legacy IPC import on device ", mapping.device(), ")")));
  // The opened pointer is the allocation's base in practice; measure from it
  // anyway, so the bound holds even if it were not.
  if (mapping.base() < range_base || mapping.base() - range_base > range_size) {
    return absl::InternalError(
        absl::StrCat("cuMemGetAddressRange returned [", range_base, ", +", range_size,
                     ") which does not contain the opened pointer ", mapping.base()));
  }
  const uint64_t mapped = range_size - (mapping.base() - range_base);
  if (handle.allocation_size > mapped || handle.offset > mapped ||
      handle.size > mapped - handle.offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "legacy IPC handle claims ", handle.size, " bytes at offset ", handle.offset, " of a ",
        handle.allocation_size, "-byte allocation, but the allocation opened on device ",
        mapping.device(), " has ", mapped, " bytes"));
  }
  return absl::OkStatus();
}

class CudaStream final : public DeviceStream {
 public:
  CudaStream(const CudaShared* owner, int device, cudaStream_t stream)
      : DeviceStream(device), owner_(owner), stream_(stream) {}
  // cudaStreamDestroy lets queued work finish in the background.
  ~CudaStream() override {
    ScopedCudaDevice on_device;
    LogIfError(on_device.Enter(device()));
    LogIfError(CudaRuntimeStatus(cudaStreamDestroy(stream_), "cudaStreamDestroy"));
  }
  absl::Status Synchronize() override {
    return CudaRuntimeStatus(cudaStreamSynchronize(stream_),
                             absl::StrCat("cudaStreamSynchronize(device ", device(), ")"));
  }
  const CudaShared* owner() const { return owner_; }
  cudaStream_t stream() const { return stream_; }

 private:
  const CudaShared* const owner_;
  const cudaStream_t stream_;
};

class CudaPinnedBuffer final : public PinnedBuffer {
 public:
  CudaPinnedBuffer(void* data, uint64_t size) : PinnedBuffer(data, size) {}
  ~CudaPinnedBuffer() override {
    LogIfError(CudaRuntimeStatus(cudaFreeHost(data()), "cudaFreeHost"));
  }
};

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(std::shared_ptr<CudaShared> shared) : shared_(std::move(shared)) {}

  absl::string_view name() const override { return "cuda"; }
  int device_count() const override { return static_cast<int>(shared_->devices.size()); }
  bool SupportsHandleKind(int device, HandleKind kind) const override {
    if (device < 0 || device >= device_count()) return false;
    return kind == HandleKind::kLegacyIpc ||
           (kind == HandleKind::kPosixFd && shared_->devices[device].posix_fd_supported);
  }

 protected:
  absl::StatusOr<DeviceMemoryInfo> DoGetMemoryInfo(int device) override {
    ScopedCudaDevice on_device;
    TENSORD_RETURN_IF_ERROR(on_device.Enter(device));
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    TENSORD_RETURN_IF_ERROR(CudaRuntimeStatus(cudaMemGetInfo(&free_bytes, &total_bytes),
                                              absl::StrCat("cudaMemGetInfo(device ", device, ")")));
    return DeviceMemoryInfo{total_bytes, free_bytes};
  }

  absl::StatusOr<std::unique_ptr<DeviceAllocation>> DoAllocate(int device, uint64_t bytes,
                                                               HandleKind kind) override {
    ScopedCudaDevice on_device;
    TENSORD_RETURN_IF_ERROR(on_device.Enter(device));
    auto block = std::make_shared<CudaBlock>();
    block->shared = shared_;
    block->device = device;
    block->size = bytes;
    if (kind == HandleKind::kLegacyIpc) {
      TENSORD_RETURN_IF_ERROR(
          CudaRuntimeStatus(cudaMalloc(&block->malloc_pointer, bytes),
                            absl::StrCat("cudaMalloc(", bytes, " bytes on device ", device, ")")));
    } else {
      const CudaDriverApi& api = shared_->api;
      uint64_t granularity = shared_->devices[device].granularity;
      if (bytes > UINT64_MAX - granularity) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot allocate ", bytes, " bytes on device ", device));
      }
      block->vmm_size = (bytes + granularity - 1) / granularity * granularity;
      CUmemAllocationProp prop = VmmProperties(device);
      CUmemGenericAllocationHandle handle = 0;
      TENSORD_RETURN_IF_ERROR(CudaDriverStatus(
          api, api.mem_create(&handle, block->vmm_size, &prop, 0),
          absl::StrCat("cuMemCreate(", block->vmm_size, " bytes on device ", device, ")")));
      block->vmm_memory = std::make_unique<VmmMemory>(shared_, handle);
      TENSORD_ASSIGN_OR_RETURN(block->vmm_mapping,
                               VmmMapping::Create(shared_, device, handle, block->vmm_size));
    }
    return std::make_unique<CudaAllocation>(std::move(block), kind);
  }

  absl::StatusOr<std::unique_ptr<DeviceStream>> DoCreateStream(int device) override {
    ScopedCudaDevice on_device;
    TENSORD_RETURN_IF_ERROR(on_device.Enter(device));
    cudaStream_t stream = nullptr;
    // A blocking stream: copies on the legacy default stream wait for it.
    TENSORD_RETURN_IF_ERROR(CudaRuntimeStatus(
        cudaStreamCreate(&stream), absl::StrCat("cudaStreamCreate(device ", device, ")")));
    return std::make_unique<CudaStream>(shared_.get(), device, stream);
  }

  absl::Status DoSynchronize(int device) override {
    ScopedCudaDevice on_device;
    TENSORD_RETURN_IF_ERROR(on_device.Enter(device));
    return CudaRuntimeStatus(cudaDeviceSynchronize(),
                             absl::StrCat("cudaDeviceSynchronize(device ", device, ")"));
  }

  absl::Status DoCopy(void* dst, int dst_device, const void* src, int src_device, uint64_t bytes,
                      DeviceStream* stream) override {
    int device = stream != nullptr ? stream->device()
                                   : (dst_device != kHostDevice ? dst_device : src_device);
    ScopedCudaDevice on_device;
    TENSORD_RETURN_IF_ERROR(on_device.Enter(device));
    cudaStream_t cuda_stream =
        stream != nullptr ? static_cast<CudaStream*>(stream)->stream() : nullptr;
    std::string call = absl::StrCat(" of ", bytes, " bytes from device ", src_device, " to device ",
                                    dst_device, " (-1: host)");
    if (dst_device != kHostDevice && src_device != kHostDevice && dst_device != src_device) {
      if (stream == nullptr) {
        return CudaRuntimeStatus(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes),
                                 absl::StrCat("cudaMemcpyPeer", call));
      }
      return CudaRuntimeStatus(
          cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, cuda_stream),
          absl::StrCat("cudaMemcpyPeerAsync", call));
    }
    // Unified addressing tells host from device pointers.
    if (stream == nullptr) {
      return CudaRuntimeStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault),
                               absl::StrCat("cudaMemcpy", call));
    }
    return CudaRuntimeStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda_stream),
                             absl::StrCat("cudaMemcpyAsync", call));
  }

  bool OwnsStream(const DeviceStream& stream) const override {
    auto* cuda = dynamic_cast<const CudaStream*>(&stream);
    return cuda != nullptr && cuda->owner() == shared_.get();
  }

  absl::StatusOr<ExportedHandle> DoExport(const DeviceAllocation& allocation) override {
    auto* cuda = dynamic_cast<const CudaAllocation*>(&allocation);
    if (cuda == nullptr || cuda->block()->shared != shared_) {
      return absl::InvalidArgumentError("the allocation was made by another backend");
    }
    const std::shared_ptr<CudaBlock>& block = cuda->block();
    const CudaDriverApi& api = shared_->api;
    ScopedCudaDevice on_device;
    TENSORD_RETURN_IF_ERROR(on_device.Enter(block->device));
    ExportedHandle handle;
    handle.device = block->device;
    handle.size = block->size;
    if (block->malloc_pointer != nullptr) {
      CUdeviceptr base = 0;
      size_t range = 0;
      TENSORD_RETURN_IF_ERROR(CudaDriverStatus(
          api, api.mem_get_address_range(&base, &range, block->address()), "cuMemGetAddressRange"));
      cudaIpcMemHandle_t ipc;
      TENSORD_RETURN_IF_ERROR(
          CudaRuntimeStatus(cudaIpcGetMemHandle(&ipc, block->malloc_pointer),
                            absl::StrCat("cudaIpcGetMemHandle(device ", block->device, ")")));
      static_assert(sizeof(ipc) == kLegacyIpcHandleBytes);
      handle.bytes.assign(reinterpret_cast<const char*>(&ipc), sizeof(ipc));
      handle.offset = block->address() - base;
      handle.allocation_size = range;
    } else {
      int fd = -1;
      TENSORD_RETURN_IF_ERROR(CudaDriverStatus(
          api,
          api.mem_export_to_shareable_handle(&fd, block->vmm_memory->handle(),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          absl::StrCat("cuMemExportToShareableHandle(device ", block->device, ")")));
      handle.fd.Reset(fd);
      handle.offset = 0;
      handle.allocation_size = block->vmm_size;
    }
    handle.keepalive = block;
    return handle;
  }

  absl::StatusOr<std::unique_ptr<ImportedMemory>> DoImport(const ExportedHandle& handle,
                                                           ImportAccess access) override {
    ScopedCudaDevice on_device;
    TENSORD_RETURN_IF_ERROR(on_device.Enter(handle.device));
    const CudaDriverApi& api = shared_->api;
    if (handle.kind == HandleKind::kLegacyIpc) {
      cudaIpcMemHandle_t ipc;
      std::memcpy(&ipc, handle.bytes.data(), sizeof(ipc));
      void* base = nullptr;
      TENSORD_RETURN_IF_ERROR(
          CudaRuntimeStatus(cudaIpcOpenMemHandle(&base, ipc, cudaIpcMemLazyEnablePeerAccess),
                            absl::StrCat("cudaIpcOpenMemHandle(device ", handle.device, ")")));
      // Owned from here: closed again if the handle's geometry does not fit.
      auto mapping = std::make_unique<LegacyIpcMapping>(handle.device, base);
      TENSORD_RETURN_IF_ERROR(CheckLegacyImportFits(api, handle, *mapping));
      return std::make_unique<CudaLegacyImport>(std::move(mapping), handle.offset, handle.size);
    }
    CUmemGenericAllocationHandle memory = 0;
    TENSORD_RETURN_IF_ERROR(CudaDriverStatus(
        api,
        api.mem_import_from_shareable_handle(
            &memory, reinterpret_cast<void*>(static_cast<uintptr_t>(handle.fd.get())),
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        absl::StrCat("cuMemImportFromShareableHandle(fd ", handle.fd.get(), ")")));
    // The mapping keeps the memory referenced; our handle goes at scope exit.
    VmmMemory imported(shared_, memory);
    TENSORD_ASSIGN_OR_RETURN(
        std::unique_ptr<VmmMapping> mapping,
        VmmMapping::Create(shared_, handle.device, memory, handle.allocation_size, access));
    return std::make_unique<CudaVmmImport>(handle.device, std::move(mapping), handle.offset,
                                           handle.size);
  }

  absl::StatusOr<std::unique_ptr<PinnedBuffer>> DoAllocatePinned(uint64_t bytes) override {
    void* data = nullptr;
    TENSORD_RETURN_IF_ERROR(CudaRuntimeStatus(cudaHostAlloc(&data, bytes, cudaHostAllocPortable),
                                              absl::StrCat("cudaHostAlloc(", bytes, " bytes)")));
    return std::make_unique<CudaPinnedBuffer>(data, bytes);
  }

 private:
  std::shared_ptr<CudaShared> shared_;
};

absl::StatusOr<CudaDeviceInfo> QueryDevice(const CudaDriverApi& api, int ordinal) {
  CudaDeviceInfo info;
  CUdevice device = 0;
  TENSORD_RETURN_IF_ERROR(CudaDriverStatus(api, api.device_get(&device, ordinal),
                                           absl::StrCat("cuDeviceGet(", ordinal, ")")));
  int vmm = 0;
  int posix_fd = 0;
  TENSORD_RETURN_IF_ERROR(
      CudaDriverStatus(api,
                       api.device_get_attribute(
                           &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
                       "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)"));
  TENSORD_RETURN_IF_ERROR(CudaDriverStatus(
      api,
      api.device_get_attribute(
          &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device),
      "cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)"));
  if (vmm != 0 && posix_fd != 0) {
    CUmemAllocationProp prop = VmmProperties(ordinal);
    size_t granularity = 0;
    TENSORD_RETURN_IF_ERROR(CudaDriverStatus(
        api,
        api.mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        absl::StrCat("cuMemGetAllocationGranularity(device ", ordinal, ")")));
    info.posix_fd_supported = granularity > 0;
    info.granularity = granularity;
  }
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateCudaBackend() {
  int count = 0;
  // Without a driver this is cudaErrorInsufficientDriver (35): no device.
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaErrorInsufficientDriver && !DriverLibraryLoadable()) {
    // The usual case of the GPU-ready image on a host without a GPU: say so
    // rather than "driver version is insufficient".
    return absl::UnavailableError(
        "no NVIDIA driver: libcuda.so.1 cannot be loaded (on a GPU host the NVIDIA container "
        "toolkit provides it: docker run --gpus all)");
  }
  if (error != cudaSuccess) {
    int driver = 0;
    std::string versions;
    if (error == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess &&
        driver > 0) {
      versions = absl::StrCat(" (driver supports CUDA ", driver / 1000, ".", driver % 1000 / 10,
                              ", this build needs CUDA ", CUDART_VERSION / 1000, ".",
                              CUDART_VERSION % 1000 / 10, ")");
    }
    return absl::UnavailableError(
        absl::StrCat("no usable CUDA device: cudaGetDeviceCount: ", cudaGetErrorName(error), ": ",
                     cudaGetErrorString(error), versions));
  }
  if (count <= 0) return absl::UnavailableError("no CUDA device is visible");
  auto shared = std::make_shared<CudaShared>();
  TENSORD_ASSIGN_OR_RETURN(shared->api, CudaDriverApi::Load());
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    TENSORD_ASSIGN_OR_RETURN(CudaDeviceInfo info, QueryDevice(shared->api, ordinal));
    shared->devices.push_back(info);
  }
  return std::unique_ptr<DeviceBackend>(std::make_unique<CudaBackend>(std::move(shared)));
}

}  // namespace tensord
