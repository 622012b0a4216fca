// Taking tensors from any Python DLPack producer (an object with __dlpack__).
#ifndef TENSORD_PYTHON_SRC_DLPACK_IMPORT_H_
#define TENSORD_PYTHON_SRC_DLPACK_IMPORT_H_

#include <utility>

#include <nanobind/nanobind.h>

#include "tensord/dlpack.h"

namespace tensord::python {

// A producer's tensor taken from its capsule: this object owns it and calls
// the producer's deleter exactly once, when destroyed (with the GIL held).
class ImportedTensor {
 public:
  ImportedTensor(DLManagedTensor* legacy, DLManagedTensorVersioned* versioned)
      : legacy_(legacy), versioned_(versioned) {}
  ~ImportedTensor();
  ImportedTensor(ImportedTensor&& other) noexcept
      : legacy_(std::exchange(other.legacy_, nullptr)),
        versioned_(std::exchange(other.versioned_, nullptr)) {}
  ImportedTensor(const ImportedTensor&) = delete;
  ImportedTensor& operator=(const ImportedTensor&) = delete;
  ImportedTensor& operator=(ImportedTensor&&) = delete;

  const DLTensor& dl_tensor() const { return legacy_ ? legacy_->dl_tensor : versioned_->dl_tensor; }
  // Only a versioned capsule can say so; a legacy producer refuses to export
  // read-only memory instead (numpy raises BufferError).
  bool read_only() const {
    return versioned_ != nullptr && (versioned_->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  }

 private:
  DLManagedTensor* legacy_;
  DLManagedTensorVersioned* versioned_;
};

// Asks `producer` for a capsule (versioned first, legacy when the producer
// predates DLPack 1.x), and takes it. TypeError when `producer` has no
// __dlpack__, BufferError when its tensor is not in host memory or its
// DLPack major version is unknown. `call` names the caller in errors
// ("put", "fetch_into").
ImportedTensor ImportDlpack(nanobind::handle producer, const char* call);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_DLPACK_IMPORT_H_
