// One published, immutable version of a named tensor, and the lease a reader
// holds on it.
#ifndef TENSORD_SERVICE_REGISTRY_TENSOR_VERSION_H_
#define TENSORD_SERVICE_REGISTRY_TENSOR_VERSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "service/device/device_backend.h"
#include "service/dlpack/tensor_layout.h"
#include "service/memory/host_bytes.h"
#include "service/registry/capacity.h"
#include "service/registry/version_info.h"
#include "tensord/retention.h"

namespace tensord {

// Whether a layout's bytes live in device memory (kDLCUDA). kDLCUDAHost is
// pinned host memory: the transport stores it as a host tensor.
inline bool IsDeviceLayout(const dlpack::TensorLayout& layout) {
  return layout.device.device_type == kDLCUDA;
}
// "cuda:1" or "cpu" for messages, logs and metric labels.
std::string DeviceLabel(const DLDevice& device);

// Everything but `open_leases` is fixed at publish. The bytes stay allocated
// (and counted against capacity) until the last shared_ptr to the version
// goes, so readers of a superseded or deleted version keep their bytes.
struct TensorVersion : VersionDescription {
  // Exactly one holds the bytes: `buffer` for host tensors, `device_memory`
  // for device tensors (null when total_bytes is 0: CUDA cannot allocate 0).
  std::unique_ptr<HostBytes> buffer;  // sealed
  std::unique_ptr<DeviceAllocation> device_memory;
  ByteReservation reservation;
  mutable std::atomic<uint64_t> open_leases{0};
  // In a cluster: the etcd revision that ordered this version among the
  // name's versions (its name record's origin); 0 for a version no record
  // orders (a single node's, a cache put's). Set at publish, or once when a
  // node joining the cluster registers what it held before.
  mutable std::atomic<int64_t> origin{0};
  // Registry-wide access tick of the last publish or lease, for LRU eviction.
  mutable std::atomic<uint64_t> last_used{0};
};

// A reader's hold on one version: keeps the bytes alive and is counted in
// `open_leases` while it exists. Move-only.
class Lease {
 public:
  Lease() = default;
  explicit Lease(std::shared_ptr<const TensorVersion> version) : version_(std::move(version)) {
    if (version_) version_->open_leases.fetch_add(1, std::memory_order_relaxed);
  }
  ~Lease() { Reset(); }
  Lease(Lease&& other) noexcept = default;
  Lease& operator=(Lease&& other) noexcept {
    if (this != &other) {
      Reset();
      version_ = std::move(other.version_);
    }
    return *this;
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  const TensorVersion* operator->() const { return version_.get(); }
  const TensorVersion& operator*() const { return *version_; }
  bool valid() const { return version_ != nullptr; }
  void Reset() {
    if (version_) version_->open_leases.fetch_sub(1, std::memory_order_relaxed);
    version_.reset();
  }

 private:
  std::shared_ptr<const TensorVersion> version_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_TENSOR_VERSION_H_
