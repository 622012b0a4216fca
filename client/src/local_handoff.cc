#include "client/src/local_handoff.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/src/info_conversion.h"
#include "service/common/crc32c.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/strided_copy.h"
#include "service/transport/layout_conversion.h"

namespace tensord {
namespace {

// Zero-size tensors map nothing but still need a valid, aligned pointer.
alignas(256) uint8_t kEmptyBytes[256];

// An mmap of a memfd, unmapped on destruction.
class Mapping {
 public:
  static absl::StatusOr<Mapping> Map(int fd, uint64_t size, int protection, int flags) {
    if (size == 0) return Mapping(kEmptyBytes, 0);
    void* data = ::mmap(nullptr, size, protection, flags, fd, 0);
    if (data == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap of ", size, " bytes"));
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
  HeldVersion(std::shared_ptr<HandoffConnection> connection, uint64_t lease_id, ScopedFd memfd,
              uint64_t mapping_bytes, TensorInfo info)
      : connection_(std::move(connection)),
        lease_id_(lease_id),
        memfd_(std::move(memfd)),
        mapping_bytes_(mapping_bytes),
        info_(std::move(info)) {}
  ~HeldVersion() { connection_->ReleaseLease(lease_id_); }

  const TensorInfo& info() const { return info_; }
  int memfd() const { return memfd_.get(); }
  uint64_t mapping_bytes() const { return mapping_bytes_; }

  // The one shared read-only mapping, made on first use.
  absl::StatusOr<void*> SharedReadOnly() {
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
  ScopedFd memfd_;
  const uint64_t mapping_bytes_;
  const TensorInfo info_;
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

class SharedReadOnlyMemory final : public TensorMemory {
 public:
  SharedReadOnlyMemory(std::shared_ptr<HeldVersion> held, void* data)
      : held_(std::move(held)), data_(data) {}
  void* data() override { return data_; }
  bool read_only() const override { return true; }
  bool is_copy() const override { return false; }

 private:
  std::shared_ptr<HeldVersion> held_;
  void* data_;
};

class LocalTensorWriter final : public TensorWriter {
 public:
  LocalTensorWriter(std::shared_ptr<HandoffConnection> connection, uint64_t create_id,
                    Mapping mapping, uint64_t size)
      : connection_(std::move(connection)),
        create_id_(create_id),
        mapping_(std::move(mapping)),
        size_(size) {}
  ~LocalTensorWriter() override {
    if (open_) {
      mapping_.Unmap();
      v1::HandoffRequest request;
      request.mutable_abort()->set_create_id(create_id_);
      (void)connection_->Call(std::move(request));
    }
  }
  void* data() override { return mapping_.data(); }
  uint64_t size() const override { return size_; }

  absl::StatusOr<TensorInfo> Seal(bool send_crc32c) override {
    if (!open_) return absl::FailedPreconditionError("tensor writer was already sealed");
    v1::HandoffRequest request;
    request.mutable_seal()->set_create_id(create_id_);
    if (send_crc32c) request.mutable_seal()->set_crc32c(Crc32c(mapping_.data(), size_));
    // The server refuses to seal while a writable mapping exists.
    mapping_.Unmap();
    open_ = false;
    TENSORD_ASSIGN_OR_RETURN(HandoffConnection::Response response,
                             connection_->Call(std::move(request)));
    return InfoFromProto(response.message.seal().info());
  }

 private:
  std::shared_ptr<HandoffConnection> connection_;
  const uint64_t create_id_;
  Mapping mapping_;
  const uint64_t size_;
  bool open_ = true;
};

}  // namespace

absl::StatusOr<std::shared_ptr<HeldVersion>> LocalHandoff::Hold(absl::string_view name,
                                                                uint64_t version) {
  v1::HandoffRequest request;
  v1::AcquireRequest* acquire = request.mutable_acquire();
  acquire->set_name(std::string(name));
  acquire->set_version(version);
  {
    MutexLock lock(&mutex_);
    if (version != 0) {
      // An explicit version already held needs no round trip.
      auto it = held_.find(std::make_pair(std::string(name), version));
      if (it != held_.end()) {
        if (std::shared_ptr<HeldVersion> held = it->second.lock()) return held;
      }
    } else {
      for (const auto& [key, weak] : held_) {
        if (key.first == name && !weak.expired()) acquire->add_held_versions(key.second);
      }
    }
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    TENSORD_ASSIGN_OR_RETURN(HandoffConnection::Response response, connection_->Call(request));
    const v1::AcquireResponse& acquired = response.message.acquire();
    TENSORD_ASSIGN_OR_RETURN(TensorInfo info, InfoFromProto(acquired.info()));
    auto key = std::make_pair(info.name, info.version);
    MutexLock lock(&mutex_);
    if (acquired.lease_id() == 0) {
      auto it = held_.find(key);
      if (it != held_.end()) {
        if (std::shared_ptr<HeldVersion> held = it->second.lock()) return held;
      }
      // Our hold ended between asking and answering: ask for a fresh lease.
      acquire->clear_held_versions();
      continue;
    }
    if (!response.fd.valid()) {
      return absl::InternalError(absl::StrCat("handoff of '", info.name, "' came without an fd"));
    }
    // Older servers leave mapping_bytes unset: the bytes themselves.
    const uint64_t mapping_bytes = std::max(acquired.mapping_bytes(), info.total_bytes);
    auto held = std::make_shared<HeldVersion>(connection_, acquired.lease_id(),
                                              std::move(response.fd), mapping_bytes, std::move(info));
    absl::erase_if(held_, [](const auto& entry) { return entry.second.expired(); });
    held_[key] = held;
    return held;
  }
  return absl::UnavailableError(absl::StrCat("could not hold tensor '", name, "'"));
}

absl::StatusOr<Tensor> LocalHandoff::Fetch(absl::string_view name, uint64_t version,
                                           bool read_only) {
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<HeldVersion> held, Hold(name, version));
  TensorInfo info = held->info();
  if (read_only) {
    TENSORD_ASSIGN_OR_RETURN(void* data, held->SharedReadOnly());
    return Tensor(std::move(info), std::make_shared<SharedReadOnlyMemory>(std::move(held), data));
  }
  // Each consumer gets its own private mapping, so one consumer's writes are
  // never seen by another tensor of this process either.
  TENSORD_ASSIGN_OR_RETURN(Mapping mapping, Mapping::Map(held->memfd(), held->mapping_bytes(),
                                                         PROT_READ | PROT_WRITE, MAP_PRIVATE));
  return Tensor(std::move(info),
                std::make_shared<PrivateMappingMemory>(std::move(held), std::move(mapping)));
}

absl::StatusOr<TensorInfo> LocalHandoff::FetchInto(absl::string_view name, uint64_t version,
                                                   const DLTensor& destination) {
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout target, dlpack::LayoutOf(destination));
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<HeldVersion> held, Hold(name, version));
  const TensorInfo& info = held->info();
  if (!dlpack::operator==(info.dtype, target.dtype) || info.shape != target.shape) {
    return absl::InvalidArgumentError(absl::StrCat("destination ", dlpack::DescribeLayout(target),
                                                   " does not match tensor '", info.name, "' ",
                                                   dlpack::DescribeLayout(LayoutOfInfo(info))));
  }
  TENSORD_ASSIGN_OR_RETURN(void* source, held->SharedReadOnly());
  TENSORD_RETURN_IF_ERROR(dlpack::CopyStrided(source, LayoutOfInfo(info), destination.data, target));
  return info;
}

absl::StatusOr<std::unique_ptr<TensorWriter>> LocalHandoff::Create(absl::string_view name,
                                                                   DLDataType dtype,
                                                                   std::span<const int64_t> shape,
                                                                   Retention retention) {
  dlpack::TensorLayout layout;
  layout.dtype = dtype;
  layout.shape.assign(shape.begin(), shape.end());
  TENSORD_ASSIGN_OR_RETURN(uint64_t size, dlpack::CompactByteSize(dtype, shape));
  v1::HandoffRequest request;
  v1::CreateRequest* create = request.mutable_create();
  create->set_name(std::string(name));
  LayoutToProto(layout, create->mutable_layout());
  create->mutable_layout()->clear_strides();
  create->set_total_bytes(size);
  create->set_retention(static_cast<v1::Retention>(retention));
  TENSORD_ASSIGN_OR_RETURN(HandoffConnection::Response response, connection_->Call(std::move(request)));
  if (!response.fd.valid()) return absl::InternalError("create answer came without an fd");
  const uint64_t create_id = response.message.create().create_id();
  const uint64_t mapping_bytes = std::max(response.message.create().mapping_bytes(), size);
  absl::StatusOr<Mapping> mapping =
      Mapping::Map(response.fd.get(), mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED);
  if (!mapping.ok()) {
    v1::HandoffRequest abort;
    abort.mutable_abort()->set_create_id(create_id);
    (void)connection_->Call(std::move(abort));
    return mapping.status();
  }
  // The mapping keeps the memory reachable; the fd is not needed any more.
  return std::unique_ptr<TensorWriter>(
      new LocalTensorWriter(connection_, create_id, std::move(*mapping), size));
}

absl::StatusOr<TensorInfo> LocalHandoff::Put(absl::string_view name, const DLTensor& tensor,
                                             bool send_crc32c, Retention retention) {
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout source, dlpack::LayoutOf(tensor));
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<TensorWriter> writer,
                           Create(name, source.dtype, source.shape, retention));
  if (writer->size() > 0) {
    dlpack::TensorLayout compact{.dtype = source.dtype, .shape = source.shape};
    TENSORD_RETURN_IF_ERROR(dlpack::CopyStrided(tensor.data, source, writer->data(), compact));
  }
  return writer->Seal(send_crc32c);
}

}  // namespace tensord
