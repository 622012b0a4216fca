// tensord::Tensor: a fetched tensor that owns its DLPack representation.
#ifndef TENSORD_CLIENT_TENSOR_H_
#define TENSORD_CLIENT_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tensord/dlpack.h"
#include "tensord/retention.h"

namespace tensord {

// What the server knows about one version of a tensor.
struct TensorInfo {
  std::string name;
  uint64_t version = 0;
  DLDataType dtype{2, 32, 1};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements, always filled
  uint64_t byte_offset = 0;      // of the stored bytes
  DLDevice device{kDLCPU, 0};
  uint64_t total_bytes = 0;  // stored bytes
  uint32_t crc32c = 0;       // of the stored bytes
  absl::Time created;
  uint64_t open_leases = 0;
  Retention retention = Retention::kDefault;
  // Client::ListCluster and cluster watches only: the node that took the
  // version's put (it may no longer hold a copy). Such entries carry name,
  // version (the cluster's order: the name record's etcd revision, not a
  // node's number), total_bytes and crc32c only.
  std::string node;
};

// Keeps a tensor's bytes alive; what kind (heap copy, shared mapping...)
// depends on how the bytes arrived.
class TensorMemory {
 public:
  virtual ~TensorMemory() = default;
  virtual void* data() = 0;
  // True when the bytes must not be written (a read-only shared mapping).
  virtual bool read_only() const = 0;
  // True when the bytes are the consumer's own copy, not the server's.
  virtual bool is_copy() const = 0;
  // Where data() points: host memory unless the bytes are an import of the
  // server's device memory ({kDLCUDA, id}; data() is then a device pointer).
  virtual DLDevice device() const { return DLDevice{kDLCPU, 0}; }
};

// A fetched tensor. Move-only. It can be used in place through dl_tensor(), or
// handed to any DLPack consumer with release() (legacy DLManagedTensor) or
// release_versioned() (DLPack 1.x). The handed-out struct's deleter frees
// everything exactly once; the Tensor is empty afterwards.
//
// What the DLTensor looks like: `data` points at element [0, ..., 0] and is
// never NULL (even for zero-size tensors), `byte_offset` is 0, `strides` is
// always filled, `shape`/`strides` live as long as the tensor. `device` is
// {kDLCPU, 0}, or {kDLCUDA, id} for a device tensor fetched over the local
// handoff (then `data` is a device pointer into the server's allocation).
class Tensor {
 public:
  Tensor() = default;
  // `memory` holds the stored bytes of `info`; data = memory + info.byte_offset.
  Tensor(TensorInfo info, std::shared_ptr<TensorMemory> memory);
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  bool empty() const { return context_ == nullptr; }
  // Valid while the Tensor is not empty.
  const DLTensor& dl_tensor() const;
  const TensorInfo& info() const;
  // Bytes from data to the end of the stored bytes (for a compact tensor:
  // exactly its size).
  uint64_t data_bytes() const;

  DLManagedTensor* release();
  // flags: READ_ONLY when the bytes are a read-only mapping, IS_COPIED when
  // they are a private copy (remote fetch).
  DLManagedTensorVersioned* release_versioned();

  struct Context;

 private:
  Context* context_ = nullptr;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_TENSOR_H_
