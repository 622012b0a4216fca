#include "client/src/local_transport.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "client/src/batch_request_wire.h"
#include "client/src/call_cancellation.h"
#include "client/src/call_routing.h"
#include "client/src/device_import_cache.h"
#include "client/src/info_conversion.h"
#include "client/src/recycled_blocks.h"
#include "service/common/crc32c.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"
#include "service/common/unix_socket.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/strided_copy.h"
#include "service/wire/handoff_batch_answer.h"
#include "service/wire/handoff_device_handle.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

// A Put over the handoff of at least this many bytes populates its memfd
// pages before copying into them.
constexpr uint64_t kPopulateBeforeCopyBytes = uint64_t{1} << 20;

// Asks the kernel to allocate every page of [data, data + size) now
// (MADV_POPULATE_WRITE, Linux 5.14). Advice only: on older kernels or
// headers, pages fault in as they are written.
void PopulateForWriting(void* data, uint64_t size) {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
  ::madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)size;
#endif
}

// Zero-size tensors map nothing but still need a valid, aligned pointer.
alignas(256) uint8_t kEmptyBytes[256];

// An mmap of a memfd, unmapped on destruction.
class Mapping {
 public:
  static absl::StatusOr<Mapping> Map(int fd, uint64_t size, int protection, int flags,
                                     uint64_t offset = 0) {
    if (size == 0) return Mapping(kEmptyBytes, 0);
    void* data = ::mmap(nullptr, size, protection, flags, fd, static_cast<off_t>(offset));
    if (data == MAP_FAILED)
      return MappingErrnoStatus(errno, absl::StrCat("mmap of ", size, " bytes"));
    return Mapping(data, size);
  }
  Mapping() = default;
  Mapping(Mapping&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Mapping& operator=(Mapping&& other) noexcept {
    if (this != &other) {
      Unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~Mapping() { Unmap(); }
  void* data() const { return data_; }
  void Unmap() {
    if (size_ > 0) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }

 private:
  Mapping(void* data, uint64_t size) : data_(data), size_(size) {}
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace

class HeldVersion {
 public:
  HeldVersion(std::shared_ptr<HandoffConnection> connection, uint64_t lease_id, TensorInfo&& info)
      : connection_(std::move(connection)), lease_id_(lease_id), info_(std::move(info)) {}
  // The import is closed (or its reference dropped) before the lease ends,
  // so this process never maps device memory the server may free.
  ~HeldVersion() {
    device_import_.reset();
    connection_->ReleaseLease(lease_id_);
  }

  void SetMemfd(ScopedFd memfd, uint64_t mapping_bytes) {
    memfd_ = std::move(memfd);
    mapping_bytes_ = mapping_bytes;
  }
  // The version's bytes start `offset` bytes into a shared arena.
  void SetArena(std::shared_ptr<const ArenaMapping> arena, uint64_t offset) {
    arena_ = std::move(arena);
    arena_offset_ = offset;
  }
  void SetDeviceImport(std::shared_ptr<const DeviceMemory> device_import) {
    device_import_ = std::move(device_import);
  }

  const TensorInfo& info() const { return info_; }
  // The info for the one Tensor of a hold nothing else copies it from (a
  // batch item's: not remembered in held_): its strings and vectors are
  // moved out, not copied; the fields this class reads (size, device,
  // version) stay.
  TensorInfo TakeInfo() { return std::move(info_); }
  bool on_device() const { return info_.device.device_type == kDLCUDA; }
  // The arena the version's bytes lie in (null for a memfd or device
  // version), and where in it.
  const ArenaMapping* arena() const { return arena_.get(); }
  uint64_t arena_offset() const { return arena_offset_; }
  // The consumer's own copy-on-write view: of the whole memfd, or of the
  // version's pages of an arena (the slot starts on a page).
  absl::StatusOr<Mapping> PrivateMapping() const {
    if (arena_ == nullptr) {
      return Mapping::Map(memfd_.get(), mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE);
    }
    return Mapping::Map(arena_->fd(), info_.total_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE,
                        arena_offset_);
  }
  // Device versions: the imported stored bytes (null when there are none).
  void* device_data() const { return device_import_ ? device_import_->data() : nullptr; }

  // The one shared read-only mapping, made on first use.
  absl::StatusOr<void*> SharedReadOnly() {
    if (arena_ != nullptr) {
      if (info_.total_bytes == 0) return static_cast<void*>(kEmptyBytes);
      return const_cast<uint8_t*>(arena_->data() + arena_offset_);
    }
    MutexLock lock(&mutex_);
    if (shared_.data() == nullptr) {
      TENSORD_ASSIGN_OR_RETURN(shared_,
                               Mapping::Map(memfd_.get(), mapping_bytes_, PROT_READ, MAP_SHARED));
    }
    return shared_.data();
  }

 private:
  std::shared_ptr<HandoffConnection> connection_;
  const uint64_t lease_id_;
  TensorInfo info_;  // name, shape and strides empty after TakeInfo
  ScopedFd memfd_;
  uint64_t mapping_bytes_ = 0;
  std::shared_ptr<const ArenaMapping> arena_;  // instead of memfd_ for a small version
  uint64_t arena_offset_ = 0;
  std::shared_ptr<const DeviceMemory> device_import_;
  Mutex mutex_;
  Mapping shared_ ABSL_GUARDED_BY(mutex_);
};

namespace {

// A consumer's own copy-on-write view of the server's pages.
class PrivateMappingMemory final : public TensorMemory {
 public:
  PrivateMappingMemory(std::shared_ptr<HeldVersion> held, Mapping mapping)
      : held_(std::move(held)), mapping_(std::move(mapping)) {}
  void* data() override { return mapping_.data(); }
  bool read_only() const override { return false; }
  bool is_copy() const override { return false; }

 private:
  std::shared_ptr<HeldVersion> held_;
  Mapping mapping_;  // unmapped before the lease is released
};

// Bytes of a held version seen through a mapping shared with other
// tensors: the arena's one read-only mapping (read_only), or a batch's
// private copy-on-write view of it (BatchPrivateViews), kept while the
// tensor lives. The view goes before the lease ends.
class HeldBytesMemory final : public TensorMemory {
 public:
  HeldBytesMemory(std::shared_ptr<HeldVersion> held, void* data, bool read_only,
                  std::shared_ptr<const Mapping> view = nullptr)
      : held_(std::move(held)), view_(std::move(view)), data_(data), read_only_(read_only) {}
  void* data() override { return data_; }
  bool read_only() const override { return read_only_; }
  bool is_copy() const override { return false; }

 private:
  std::shared_ptr<HeldVersion> held_;
  std::shared_ptr<const Mapping> view_;
  void* data_;
  const bool read_only_;
};

// The private copy-on-write views of a batch's arena versions: one mapping
// per arena, covering the batch's slots in it, instead of one per tensor (a
// system call each way and, at 65,530 tensors, vm.max_map_count). Slots
// never share a page, so a write to one tensor's pages stays out of every
// other tensor's, as with mappings of their own. Versions held twice in the
// batch, and 0-byte ones, are left out (TensorOf maps those alone).
class BatchPrivateViews {
 public:
  // Maps the views of `versions` (null entries skipped).
  static absl::StatusOr<BatchPrivateViews> Map(
      std::span<const std::shared_ptr<HeldVersion>> versions) {
    struct Span {
      uint64_t begin = ~uint64_t{0};
      uint64_t end = 0;
      absl::flat_hash_set<uint64_t> offsets;
    };
    absl::flat_hash_map<const ArenaMapping*, Span> spans;
    BatchPrivateViews views;
    views.in_view_.assign(versions.size(), false);
    for (size_t i = 0; i < versions.size(); ++i) {
      const HeldVersion* held = versions[i].get();
      if (held == nullptr || held->arena() == nullptr || held->info().total_bytes == 0) continue;
      Span& span = spans[held->arena()];
      if (!span.offsets.insert(held->arena_offset()).second) continue;  // held twice
      span.begin = std::min(span.begin, held->arena_offset());
      span.end = std::max(span.end, held->arena_offset() + held->info().total_bytes);
      views.in_view_[i] = true;
    }
    for (const auto& [arena, span] : spans) {
      TENSORD_ASSIGN_OR_RETURN(
          Mapping view, Mapping::Map(arena->fd(), span.end - span.begin, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE, span.begin));
      views.views_.emplace(arena,
                           View{std::make_shared<const Mapping>(std::move(view)), span.begin});
    }
    return views;
  }

  // The Tensor of `versions[index]` in its batch view; nullopt when it has
  // none.
  std::optional<Tensor> TensorOf(size_t index, std::shared_ptr<HeldVersion>& held) const {
    if (!in_view_[index]) return std::nullopt;
    const View& view = views_.at(held->arena());
    void* data = static_cast<uint8_t*>(view.mapping->data()) + (held->arena_offset() - view.begin);
    TensorInfo info = held->TakeInfo();  // a batch item's hold is its tensor's alone
    return Tensor(std::move(info), std::allocate_shared<HeldBytesMemory>(
                                       RecyclingAllocator<HeldBytesMemory>(), std::move(held), data,
                                       /*read_only=*/false, view.mapping));
  }

 private:
  struct View {
    std::shared_ptr<const Mapping> mapping;
    uint64_t begin;  // the arena offset the mapping starts at
  };
  absl::flat_hash_map<const ArenaMapping*, View> views_;
  std::vector<bool> in_view_;
};

// The server's device memory imported into this process. Always flagged
// read-only: it is the stored version itself, with no copy-on-write.
class DeviceTensorMemory final : public TensorMemory {
 public:
  explicit DeviceTensorMemory(std::shared_ptr<HeldVersion> held) : held_(std::move(held)) {}
  void* data() override {
    void* data = held_->device_data();
    return data != nullptr ? data : kEmptyBytes;  // 0-byte versions have no allocation
  }
  bool read_only() const override { return true; }
  bool is_copy() const override { return false; }
  DLDevice device() const override { return held_->info().device; }

 private:
  std::shared_ptr<HeldVersion> held_;
};

// Refusal of a device version when the caller needs host bytes; kAuto then
// copies it over gRPC.
absl::Status HostBytesNeeded(const TensorInfo& info) {
  return MarkUseRemote(absl::FailedPreconditionError(absl::StrCat(
      "tensor '", info.name, "' version ", info.version, " is in cuda:", info.device.device_id,
      " memory and host bytes were asked for: use TransferPath::kRemote or kAuto")));
}

void AbortCreate(HandoffConnection& connection, uint64_t create_id) {
  v1::HandoffRequest request;
  request.mutable_abort()->set_create_id(create_id);
  (void)connection.Call(std::move(request));
}

}  // namespace

// A writer of a create pending on the server: sealed alone (Seal) or with
// others as one atomic group (LocalTransport::SealGroup).
class PendingCreateWriter : public TensorWriter {
 public:
  PendingCreateWriter(std::shared_ptr<HandoffConnection> connection, uint64_t create_id)
      : connection_(std::move(connection)), create_id_(create_id) {}

  absl::StatusOr<TensorInfo> Seal(bool send_crc32c) final {
    TENSORD_ASSIGN_OR_RETURN(v1::SealRequest seal, PrepareSeal(send_crc32c));
    v1::HandoffRequest request;
    *request.mutable_seal() = std::move(seal);
    TENSORD_ASSIGN_OR_RETURN(HandoffConnection::Response response,
                             connection_->Call(std::move(request)));
    return InfoFromProto(response.message->seal().info());
  }

  // The seal of this create: its checksum when asked, then this process's
  // view of the bytes closed (the server refuses to seal while a writable
  // mapping exists). The writer is closed from then on; on error it is
  // still open (and its destructor aborts the create).
  absl::StatusOr<v1::SealRequest> PrepareSeal(bool send_crc32c) {
    if (!open_) return absl::FailedPreconditionError("tensor writer was already sealed");
    v1::SealRequest seal;
    seal.set_create_id(create_id_);
    if (send_crc32c) {
      TENSORD_ASSIGN_OR_RETURN(uint32_t crc, Checksum());
      seal.set_crc32c(crc);
    }
    CloseView();
    open_ = false;
    return seal;
  }

  const std::shared_ptr<HandoffConnection>& connection() const { return connection_; }
  // Gives up a create whose seal was prepared but will not be sent.
  void AbortPrepared() { AbortCreate(*connection_, create_id_); }

 protected:
  // Aborts the create when the writer goes unsealed.
  void AbortIfOpen() {
    if (!open_) return;
    CloseView();
    AbortCreate(*connection_, create_id_);
    open_ = false;
  }

 private:
  virtual absl::StatusOr<uint32_t> Checksum() = 0;
  virtual void CloseView() = 0;

  std::shared_ptr<HandoffConnection> connection_;
  const uint64_t create_id_;
  bool open_ = true;
};

namespace {

class LocalTensorWriter final : public PendingCreateWriter {
 public:
  LocalTensorWriter(std::shared_ptr<HandoffConnection> connection, uint64_t create_id,
                    Mapping mapping, uint64_t size)
      : PendingCreateWriter(std::move(connection), create_id),
        mapping_(std::move(mapping)),
        size_(size) {}
  ~LocalTensorWriter() override { AbortIfOpen(); }
  void* data() override { return mapping_.data(); }
  uint64_t size() const override { return size_; }

 private:
  absl::StatusOr<uint32_t> Checksum() override { return Crc32c(mapping_.data(), size_); }
  void CloseView() override { mapping_.Unmap(); }

  Mapping mapping_;
  const uint64_t size_;
};

// A producer's import of a pending device create. Not cached: it is the only
// import of that allocation until the seal publishes it, and it is closed
// before the seal is sent.
class DeviceTensorWriter final : public PendingCreateWriter {
 public:
  DeviceTensorWriter(std::shared_ptr<HandoffConnection> connection, uint64_t create_id,
                     DeviceBackend* importer, std::unique_ptr<ImportedMemory> memory, uint64_t size,
                     DLDevice device)
      : PendingCreateWriter(std::move(connection), create_id),
        importer_(importer),
        memory_(std::move(memory)),
        size_(size),
        device_(device) {}
  ~DeviceTensorWriter() override { AbortIfOpen(); }
  void* data() override { return memory_ ? memory_->data() : kEmptyBytes; }
  uint64_t size() const override { return size_; }
  DLDevice device() const override { return device_; }

 private:
  // The producer's bytes, copied to the host in bounded pieces.
  absl::StatusOr<uint32_t> Checksum() override {
    if (memory_ == nullptr) return Crc32c(nullptr, 0);
    constexpr uint64_t kStagingBytes = uint64_t{4} << 20;
    std::vector<uint8_t> staging(std::min(kStagingBytes, size_));
    uint32_t crc = 0;
    for (uint64_t offset = 0; offset < size_; offset += staging.size()) {
      const uint64_t piece = std::min<uint64_t>(staging.size(), size_ - offset);
      TENSORD_RETURN_IF_ERROR(
          importer_->CopyDeviceToHost(staging.data(), *memory_, offset, piece, nullptr));
      crc = Crc32cExtend(crc, staging.data(), piece);
    }
    return crc;
  }
  // Closed before the server publishes the bytes.
  void CloseView() override { memory_.reset(); }

  DeviceBackend* const importer_;  // the process cache's, never destroyed
  std::unique_ptr<ImportedMemory> memory_;
  const uint64_t size_;
  const DLDevice device_;
};

}  // namespace

absl::Status LocalTransport::ImportDevice(HeldVersion& held, const LeaseGrant& grant, ScopedFd fd) {
  const TensorInfo& info = held.info();
  if (info.total_bytes == 0) return absl::OkStatus();  // no allocation to import
  if (grant.device_handle == nullptr) {
    return absl::InternalError(
        absl::StrCat("handoff of device tensor '", info.name, "' came without a device handle"));
  }
  absl::StatusOr<std::shared_ptr<const DeviceMemory>> imported =
      [&]() -> absl::StatusOr<std::shared_ptr<const DeviceMemory>> {
    TENSORD_ASSIGN_OR_RETURN(ExportedHandle handle,
                             DeviceHandleFromProto(*grant.device_handle, std::move(fd)));
    if (handle.device != info.device.device_id || handle.size != info.total_bytes) {
      return absl::InternalError(absl::StrCat("device handle of '", info.name, "' covers ",
                                              handle.size, " bytes on device ", handle.device,
                                              ", not the tensor's ", info.total_bytes,
                                              " bytes on cuda:", info.device.device_id));
    }
    // The instance keeps a restarted server (same socket, maybe the same
    // pid, version numbers again from 1) apart from its predecessor.
    return DeviceImportCache::Process().Import(
        absl::StrCat(connection_->server_identity(), "#", grant.device_handle->server_instance()),
        grant.device_handle->backend(), handle, info.name, info.version);
  }();
  if (!imported.ok()) {
    // kAuto still gets the bytes, over gRPC; kLocal reports why.
    return MarkUseRemote(absl::Status(
        imported.status().code(),
        absl::StrCat("cannot import device tensor '", info.name, "' version ", info.version,
                     " from the server's ", grant.device_handle->backend(),
                     " backend: ", imported.status().message())));
  }
  held.SetDeviceImport(*std::move(imported));
  return absl::OkStatus();
}

absl::Status LocalTransport::MapArenaSlot(HeldVersion& held, const LeaseGrant& grant, ScopedFd fd) {
  const TensorInfo& info = held.info();
  const uint64_t offset = grant.mapping_offset;
  const uint64_t size = grant.mapping_bytes;
  if (offset % static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) != 0 || offset > size ||
      info.total_bytes > size - offset) {
    return absl::InternalError(absl::StrCat("handoff of '", info.name, "' places its ",
                                            info.total_bytes, " bytes at offset ", offset,
                                            " of an arena of ", size, " bytes"));
  }
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<const ArenaMapping> arena,
                           arenas_.Get(grant.arena_id, std::move(fd), size));
  held.SetArena(std::move(arena), offset);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<HeldVersion>> LocalTransport::Hold(absl::string_view name,
                                                                  uint64_t version,
                                                                  bool host_only) {
  v1::HandoffRequest request;
  v1::AcquireRequest* acquire = request.mutable_acquire();
  acquire->set_name(std::string(name));
  acquire->set_version(version);
  acquire->set_host_only(host_only);
  acquire->set_accepts_arena_slots(true);
  // A refused hold may be the last reference: released (a socket round
  // trip) only after mutex_ is dropped.
  std::shared_ptr<HeldVersion> refused;
  {
    MutexLock lock(&mutex_);
    if (version != 0) {
      // An explicit version already held needs no round trip.
      auto it = held_.find(std::make_pair(std::string(name), version));
      if (it != held_.end()) {
        if (std::shared_ptr<HeldVersion> held = it->second.lock()) {
          if (!(host_only && held->on_device())) return held;
          refused = std::move(held);
        }
      }
    } else {
      for (const auto& [key, weak] : held_) {
        if (key.first == name && !weak.expired()) acquire->add_held_versions(key.second);
      }
    }
  }
  if (refused != nullptr) return HostBytesNeeded(refused->info());
  for (int attempt = 0; attempt < 2; ++attempt) {
    TENSORD_ASSIGN_OR_RETURN(HandoffConnection::Response response, connection_->Call(request));
    const v1::AcquireResponse& acquired = response.message->acquire();
    TENSORD_ASSIGN_OR_RETURN(TensorInfo info, InfoFromProto(acquired.info()));
    auto key = std::make_pair(info.name, info.version);
    if (acquired.lease_id() == 0) {
      MutexLock lock(&mutex_);
      auto it = held_.find(key);
      if (it != held_.end()) {
        if (std::shared_ptr<HeldVersion> held = it->second.lock()) return held;
      }
      // Our hold ended between asking and answering: ask for a fresh lease.
      acquire->clear_held_versions();
      continue;
    }
    const LeaseGrant grant{
        .lease_id = acquired.lease_id(),
        .mapping_bytes = acquired.mapping_bytes(),
        .mapping_offset = acquired.mapping_offset(),
        .arena_id = acquired.arena_id(),
        .device_handle = acquired.has_device_handle() ? &acquired.device_handle() : nullptr};
    return Adopt(grant, std::move(info), std::move(response.fd));
  }
  return absl::UnavailableError(absl::StrCat("could not hold tensor '", name, "'"));
}

absl::StatusOr<std::shared_ptr<HeldVersion>> LocalTransport::Adopt(const LeaseGrant& grant,
                                                                   TensorInfo&& info, ScopedFd fd,
                                                                   bool remember) {
  // From here on the lease ends with `held`, also on the error paths.
  auto held = std::allocate_shared<HeldVersion>(RecyclingAllocator<HeldVersion>(), connection_,
                                                grant.lease_id, std::move(info));
  if (held->on_device()) {
    TENSORD_RETURN_IF_ERROR(ImportDevice(*held, grant, std::move(fd)));
  } else if (grant.arena_id != 0) {
    TENSORD_RETURN_IF_ERROR(MapArenaSlot(*held, grant, std::move(fd)));
  } else {
    if (!fd.valid()) {
      return absl::InternalError(
          absl::StrCat("handoff of '", held->info().name, "' came without an fd"));
    }
    if (grant.mapping_bytes < held->info().total_bytes) {
      return absl::InternalError(absl::StrCat(
          "handoff of '", held->info().name, "' came with mapping_bytes ", grant.mapping_bytes,
          ", fewer than its ", held->info().total_bytes, " bytes"));
    }
    held->SetMemfd(std::move(fd), grant.mapping_bytes);
  }
  if (!remember) return held;
  auto key = std::make_pair(held->info().name, held->info().version);
  MutexLock lock(&mutex_);
  // Pruned when it has doubled since, so a batch of N stays O(N).
  if (held_.size() >= 2 * held_after_prune_) {
    absl::erase_if(held_, [](const auto& entry) { return entry.second.expired(); });
    held_after_prune_ = held_.size();
  }
  held_[std::move(key)] = held;
  return held;
}

absl::StatusOr<Tensor> LocalTransport::Fetch(absl::string_view name, const FetchOptions& options,
                                             const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(CheckNotCancelled(call, absl::StrCat("fetch of '", name, "'")));
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<HeldVersion> held,
                           Hold(name, options.version, options.device_to_host));
  return TensorOf(std::move(held), options);
}

absl::StatusOr<Tensor> LocalTransport::TensorOf(std::shared_ptr<HeldVersion> held,
                                                const FetchOptions& options, bool sole_holder) {
  TensorInfo info = sole_holder ? held->TakeInfo() : held->info();
  if (held->on_device()) {
    return Tensor(std::move(info), std::make_shared<DeviceTensorMemory>(std::move(held)));
  }
  if (options.read_only) {
    TENSORD_ASSIGN_OR_RETURN(void* data, held->SharedReadOnly());
    return Tensor(std::move(info),
                  std::allocate_shared<HeldBytesMemory>(RecyclingAllocator<HeldBytesMemory>(),
                                                        std::move(held), data, /*read_only=*/true));
  }
  // Each consumer gets its own private mapping, so one consumer's writes are
  // never seen by another tensor of this process either.
  TENSORD_ASSIGN_OR_RETURN(Mapping mapping, held->PrivateMapping());
  return Tensor(std::move(info),
                std::make_shared<PrivateMappingMemory>(std::move(held), std::move(mapping)));
}

absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> LocalTransport::BatchFetch(
    const BatchSelection& selection, const FetchOptions& options, const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(CheckNotCancelled(call, "batch fetch"));
  if (selection.cluster_group != 0) {
    // Found in etcd and copied between nodes: a gRPC call's work.
    return MarkUseRemote(absl::FailedPreconditionError(absl::StrCat(
        "cluster group ", selection.cluster_group, " is read over gRPC, not the local handoff")));
  }
  // Mapped until the answers are in, so the server need not send their fds
  // (a bounded list: an arena not named just comes with its fd again).
  const auto pinned = arenas_.Pin();
  std::vector<uint64_t> mapped_arena_ids;
  for (size_t i = 0; i < pinned.size() && i < kMaxNamedArenas; ++i) {
    mapped_arena_ids.push_back(pinned[i].first);
  }
  if (selection.items.empty()) {
    v1::HandoffRequest request;
    v1::AcquireManyRequest* acquire = request.mutable_acquire_many();
    acquire->set_host_only(options.device_to_host);
    acquire->set_accepts_arena_slots(true);
    acquire->mutable_mapped_arena_ids()->Add(mapped_arena_ids.begin(), mapped_arena_ids.end());
    if (selection.prefix.has_value()) acquire->set_prefix(*selection.prefix);
    acquire->set_group_version(selection.group_version);
    return AdoptBatch(request, /*appended_fields=*/"", 0, options);
  }
  // Names go in requests of at most one handoff packet each; every request
  // is one cut of its own. Each is framed by hand (batch_request_wire.h).
  std::vector<absl::StatusOr<Tensor>> results;
  results.reserve(selection.items.size());
  std::string acquire_field;
  size_t next = 0;
  while (next < selection.items.size()) {
    // Room for the field's own tags and the arena ids, and for the request
    // id and the releases the connection adds.
    size_t request_bytes = 64 + 11 * mapped_arena_ids.size();
    const size_t first = next;
    while (next < selection.items.size()) {
      const size_t item_bytes = NameVersionItemSize(selection.items[next]);
      if (next > first && request_bytes + item_bytes > kMaxBatchPacketBytes - 1024) break;
      request_bytes += item_bytes;
      ++next;
    }
    acquire_field.clear();
    AppendAcquireManyField({.items = selection.items.subspan(first, next - first),
                            .host_only = options.device_to_host,
                            .accepts_arena_slots = true,
                            .mapped_arena_ids = mapped_arena_ids},
                           acquire_field);
    v1::HandoffRequest request;
    TENSORD_ASSIGN_OR_RETURN(std::vector<absl::StatusOr<Tensor>> part,
                             AdoptBatch(request, acquire_field, next - first, options));
    for (auto& tensor : part) results.push_back(std::move(tensor));
  }
  return results;
}

absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> LocalTransport::AdoptBatch(
    v1::HandoffRequest& request, absl::string_view appended_fields, size_t item_count,
    const FetchOptions& options) {
  const bool by_name = item_count > 0;
  // In result order. An item's tensor is made as its packet comes, while
  // the server writes the next packet; every lease of the answer is adopted
  // at once (so each ends when its holder goes, also after an error below).
  std::vector<absl::StatusOr<Tensor>> results(item_count);
  std::vector<bool> answered(item_count, false);
  absl::Status malformed;
  WireAcquiredItem item;  // reused: its strings and vectors keep their memory
  std::vector<std::shared_ptr<HeldVersion>> packet_holds;  // reused, one packet's
  std::vector<size_t> packet_indexes;
  TENSORD_RETURN_IF_ERROR(connection_->CallBatch(
      request, appended_fields, [&](HandoffConnection::BatchPacket& packet) -> absl::Status {
        std::vector<ScopedFd> fds;
        if (packet.fd.valid()) fds.push_back(std::move(packet.fd));
        for (ScopedFd& fd : packet.more_fds) fds.push_back(std::move(fd));
        size_t next_fd = 0;
        packet_holds.clear();
        packet_indexes.clear();
        for (std::span<const uint8_t> item_bytes : packet.answer.items) {
          if (!ParseWireAcquiredItem(item_bytes, kAcquiredItemNesting, item)) {
            return absl::InternalError(absl::StrCat("handoff socket ", connection_->path(),
                                                    " sent an invalid batch answer item"));
          }
          absl::StatusOr<std::shared_ptr<HeldVersion>> held = AdoptItem(item, fds, next_fd);
          size_t index = results.size();
          if (!by_name) {
            results.emplace_back();
            answered.push_back(true);
          } else if (item.index < results.size()) {
            index = item.index;
            answered[index] = true;
          } else {
            malformed = absl::InternalError(
                absl::StrCat("batch answer names item ", item.index, " of ", results.size()));
            continue;
          }
          if (!held.ok()) {
            results[index] = std::move(held).status();
            continue;
          }
          packet_holds.push_back(*std::move(held));
          packet_indexes.push_back(index);
        }
        MakeBatchTensors(packet_holds, options, [&](size_t i, absl::StatusOr<Tensor> tensor) {
          results[packet_indexes[i]] = std::move(tensor);
        });
        return absl::OkStatus();
      }));
  TENSORD_RETURN_IF_ERROR(malformed);
  for (size_t i = 0; i < results.size(); ++i) {
    if (!answered[i]) results[i] = absl::InternalError("the server sent no answer for it");
  }
  return results;
}

void LocalTransport::MakeBatchTensors(
    std::span<std::shared_ptr<HeldVersion>> holds, const FetchOptions& options,
    absl::FunctionRef<void(size_t, absl::StatusOr<Tensor>)> place) {
  std::optional<BatchPrivateViews> views;
  if (!options.read_only) {
    // Without views (no mapping left) each tensor maps its own pages below,
    // and fails alone if that fails too.
    absl::StatusOr<BatchPrivateViews> mapped = BatchPrivateViews::Map(holds);
    if (mapped.ok()) views = *std::move(mapped);
  }
  for (size_t i = 0; i < holds.size(); ++i) {
    std::optional<Tensor> in_view;
    if (views.has_value()) in_view = views->TensorOf(i, holds[i]);
    if (in_view.has_value()) {
      place(i, *std::move(in_view));
    } else {
      place(i, TensorOf(std::move(holds[i]), options, /*sole_holder=*/true));
    }
  }
}

absl::StatusOr<std::shared_ptr<HeldVersion>> LocalTransport::AdoptItem(WireAcquiredItem& item,
                                                                       std::vector<ScopedFd>& fds,
                                                                       size_t& next_fd) {
  if (item.status_code != 0) {
    absl::Status refusal(static_cast<absl::StatusCode>(item.status_code), item.status_message);
    return item.use_remote ? MarkUseRemote(std::move(refusal))
                           : MarkServerAnswer(std::move(refusal));
  }
  ScopedFd fd;
  if (item.fd_attached) {
    if (next_fd == fds.size()) return absl::InternalError("batch answer lacks an item's fd");
    fd = std::move(fds[next_fd++]);
  }
  const LeaseGrant grant{.lease_id = item.lease_id,
                         .mapping_bytes = item.mapping_bytes,
                         .mapping_offset = item.mapping_offset,
                         .arena_id = item.arena_id,
                         .device_handle = item.has_device_handle ? &item.device_handle : nullptr};
  TensorInfo info;
  if (absl::Status valid = InfoFromWire(item.info, info); !valid.ok()) {
    connection_->ReleaseLease(grant.lease_id);
    return valid;
  }
  return Adopt(grant, std::move(info), std::move(fd), /*remember=*/false);
}

absl::StatusOr<TensorInfo> LocalTransport::FetchInto(absl::string_view name,
                                                     const DLTensor& destination,
                                                     const FetchOptions& options,
                                                     const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(CheckNotCancelled(call, absl::StrCat("fetch of '", name, "'")));
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout target, dlpack::LayoutOf(destination));
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<HeldVersion> held,
                           Hold(name, options.version, /*host_only=*/true));
  const TensorInfo& info = held->info();
  TENSORD_RETURN_IF_ERROR(CheckDestinationMatches(target, info));
  TENSORD_ASSIGN_OR_RETURN(void* source, held->SharedReadOnly());
  TENSORD_RETURN_IF_ERROR(
      dlpack::CopyStrided(source, LayoutOfInfo(info), destination.data, target));
  return info;
}

absl::StatusOr<std::unique_ptr<TensorWriter>> LocalTransport::Create(absl::string_view name,
                                                                     DLDataType dtype,
                                                                     std::span<const int64_t> shape,
                                                                     const CreateOptions& options,
                                                                     const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(CheckNotCancelled(call, absl::StrCat("create of '", name, "'")));
  const std::optional<DLDevice>& device = options.device;
  dlpack::TensorLayout layout;
  layout.dtype = dtype;
  layout.shape.assign(shape.begin(), shape.end());
  if (device.has_value()) layout.device = *device;
  TENSORD_ASSIGN_OR_RETURN(uint64_t size, dlpack::CompactByteSize(dtype, shape));
  v1::HandoffRequest request;
  v1::CreateRequest* create = request.mutable_create();
  create->set_name(std::string(name));
  LayoutToProto(layout, create->mutable_layout());
  create->mutable_layout()->clear_strides();
  create->set_total_bytes(size);
  create->set_retention(static_cast<v1::Retention>(options.retention));
  create->set_replicas(options.replicas);
  TENSORD_ASSIGN_OR_RETURN(HandoffConnection::Response response,
                           connection_->Call(std::move(request)));
  const v1::CreateResponse& created = response.message->create();
  const uint64_t create_id = created.create_id();
  if (device.has_value() && device->device_type == kDLCUDA) {
    return CreateOnDevice(create_id, size, created, std::move(response.fd), *device);
  }
  if (!response.fd.valid()) {
    AbortCreate(*connection_, create_id);
    return absl::InternalError("create answer came without an fd");
  }
  const uint64_t mapping_bytes = std::max(created.mapping_bytes(), size);
  absl::StatusOr<Mapping> mapping =
      Mapping::Map(response.fd.get(), mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED);
  if (!mapping.ok()) {
    AbortCreate(*connection_, create_id);
    return mapping.status();
  }
  // The mapping keeps the memory reachable; the fd is not needed any more.
  return std::unique_ptr<TensorWriter>(
      std::make_unique<LocalTensorWriter>(connection_, create_id, std::move(*mapping), size));
}

absl::StatusOr<std::unique_ptr<TensorWriter>> LocalTransport::CreateOnDevice(
    uint64_t create_id, uint64_t size, const v1::CreateResponse& created, ScopedFd fd,
    DLDevice device) {
  std::unique_ptr<ImportedMemory> memory;
  DeviceBackend* importer = nullptr;
  if (size > 0) {  // a 0-byte device create has no allocation
    absl::Status imported = [&]() -> absl::Status {
      if (!created.has_device_handle()) {
        return absl::InternalError("device create answer came without a device handle");
      }
      TENSORD_ASSIGN_OR_RETURN(ExportedHandle handle,
                               DeviceHandleFromProto(created.device_handle(), std::move(fd)));
      if (handle.size != size || handle.device != device.device_id) {
        return absl::InternalError(absl::StrCat(
            "device create answer covers ", handle.size, " bytes on device ", handle.device,
            ", not the ", size, " bytes asked for on cuda:", device.device_id));
      }
      TENSORD_ASSIGN_OR_RETURN(
          importer, DeviceImportCache::Process().Importer(created.device_handle().backend()));
      TENSORD_ASSIGN_OR_RETURN(memory, importer->Import(handle));
      return absl::OkStatus();
    }();
    if (!imported.ok()) {
      AbortCreate(*connection_, create_id);
      return imported;
    }
  }
  return std::unique_ptr<TensorWriter>(
      new DeviceTensorWriter(connection_, create_id, importer, std::move(memory), size, device));
}

absl::StatusOr<SealGroupResult> LocalTransport::SealGroup(
    std::span<const std::unique_ptr<TensorWriter>> writers, bool send_crc32c) {
  if (writers.empty()) return absl::InvalidArgumentError("a group needs at least one writer");
  std::vector<PendingCreateWriter*> creates;
  for (size_t i = 0; i < writers.size(); ++i) {
    auto* create = dynamic_cast<PendingCreateWriter*>(writers[i].get());
    if (create == nullptr || create->connection() != connection_) {
      return absl::InvalidArgumentError(
          absl::StrCat("writer ", i,
                       " was not made by this client's local Create; a group is sealed on the "
                       "connection that created all of its tensors"));
    }
    creates.push_back(create);
  }
  // One request packet: a create id and its checksum take at most 18 bytes.
  const size_t most = (kMaxBatchPacketBytes - 1024) / 18;
  if (creates.size() > most) {
    return absl::InvalidArgumentError(absl::StrCat("a seal group of ", creates.size(),
                                                   " creates; one group takes at most ", most));
  }
  v1::HandoffRequest request;
  for (size_t i = 0; i < creates.size(); ++i) {
    absl::StatusOr<v1::SealRequest> seal = creates[i]->PrepareSeal(send_crc32c);
    if (!seal.ok()) {
      // Nothing is sent: the creates already closed are given up here, the
      // rest when their writers go.
      for (size_t done = 0; done < i; ++done) creates[done]->AbortPrepared();
      return seal.status();
    }
    *request.mutable_seal_group()->add_seals() = *std::move(seal);
  }
  absl::StatusOr<HandoffConnection::Response> response = connection_->Call(std::move(request));
  if (!response.ok()) {
    // The writers are closed; creates the server did not consume go now
    // rather than at its create timeout.
    for (PendingCreateWriter* create : creates) create->AbortPrepared();
    return response.status();
  }
  SealGroupResult result;
  for (const v1::TensorInfo& info : response->message->seal_group().infos()) {
    TENSORD_ASSIGN_OR_RETURN(result.items.emplace_back(), InfoFromProto(info));
  }
  if (result.items.size() != creates.size()) {
    return absl::InternalError(absl::StrCat("seal group of ", creates.size(),
                                            " creates was answered with ", result.items.size(),
                                            " infos"));
  }
  result.group_version = result.items.front().version;
  result.cluster_group = response->message->seal_group().cluster_group();
  return result;
}

absl::StatusOr<TensorInfo> LocalTransport::Put(absl::string_view name, const DLTensor& tensor,
                                               const PutOptions& options, const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(CheckNotCancelled(call, absl::StrCat("put of '", name, "'")));
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout source, dlpack::LayoutOf(tensor));
  CreateOptions create;
  create.retention = options.retention;
  create.replicas = options.replicas;
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<TensorWriter> writer,
                           Create(name, source.dtype, source.shape, create, call));
  if (writer->size() > 0) {
    // Every page is about to be written: allocated in one call instead of
    // one write fault per page of the memfd (half a 256 MiB put's CPU).
    if (writer->size() >= kPopulateBeforeCopyBytes)
      PopulateForWriting(writer->data(), writer->size());
    dlpack::TensorLayout compact{.dtype = source.dtype, .shape = source.shape};
    TENSORD_RETURN_IF_ERROR(dlpack::CopyStrided(tensor.data, source, writer->data(), compact));
  }
  return writer->Seal(options.send_crc32c);
}

}  // namespace tensord
