// Exporting fetched tensors to Python DLPack consumers (__dlpack__).
#ifndef TENSORD_PYTHON_SRC_DLPACK_EXPORT_H_
#define TENSORD_PYTHON_SRC_DLPACK_EXPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include <nanobind/nanobind.h>

#include "tensord/tensor.h"

namespace tensord::python {

// A fetched tensor's DLPack struct, taken from the C++ Tensor once and shared
// by every capsule exported from it. Its deleter (which returns the mapping
// and the lease) runs when the Python object and every export are gone.
class HeldTensor {
 public:
  explicit HeldTensor(Tensor tensor);
  ~HeldTensor();
  HeldTensor(const HeldTensor&) = delete;
  HeldTensor& operator=(const HeldTensor&) = delete;

  const TensorInfo& info() const { return info_; }
  const DLTensor& dl_tensor() const { return managed_->dl_tensor; }
  bool read_only() const { return (managed_->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0; }
  bool is_copy() const { return (managed_->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0; }
  // {kDLCPU, 0}, or {kDLCUDA, N} for a device tensor imported over the handoff.
  DLDevice device() const { return managed_->dl_tensor.device; }

 private:
  TensorInfo info_;
  DLManagedTensorVersioned* managed_;
};

// What the consumer asked of __dlpack__, already checked.
struct ExportRequest {
  // Major, minor; nullopt: the consumer knows only legacy capsules.
  std::optional<std::pair<int64_t, int64_t>> max_version;
  // True: copy; false: never copy; nullopt: copy only if needed.
  std::optional<bool> copy;
};

// Parses __dlpack__'s keyword arguments for a tensor on `device`;
// ValueError/TypeError/BufferError (raised as nanobind exceptions) name the
// bad value. `stream` must be None for host tensors, None or an int for
// device ones; `dl_device` None or `device` itself.
ExportRequest ParseExportRequest(nanobind::handle stream, nanobind::handle max_version,
                                 nanobind::handle dl_device, nanobind::handle copy,
                                 DLDevice device);

// A new "dltensor" or "dltensor_versioned" capsule over `held` (or a private
// copy of its bytes). The capsule's destructor is native; it calls the DLPack
// deleter only when no consumer took the capsule.
// copy=True of a device tensor raises BufferError (no device copies here).
nanobind::object ExportCapsule(const std::shared_ptr<const HeldTensor>& held,
                               const ExportRequest& request);

// A writable capsule over memory that `owner` keeps alive (a TensorWriter's
// buffer; `tensor`'s shape and strides must live as long as `owner`). No
// flags; copy=True raises BufferError naming `what`, since writes to a copy
// would be lost.
nanobind::object ExportWritableCapsule(const DLTensor& tensor, std::shared_ptr<const void> owner,
                                       const ExportRequest& request, const char* what);

// Counts for the tests: capsules created, and DLPack deleters run on them.
struct ExportCounters {
  uint64_t exported = 0;
  uint64_t deleted = 0;
};
ExportCounters ReadExportCounters();

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_DLPACK_EXPORT_H_
