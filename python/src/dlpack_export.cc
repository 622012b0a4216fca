#include "python/src/dlpack_export.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace tensord::python {
namespace {

namespace nb = nanobind;

constexpr char kLegacyName[] = "dltensor";
constexpr char kUsedLegacyName[] = "used_dltensor";
constexpr char kVersionedName[] = "dltensor_versioned";
constexpr char kUsedVersionedName[] = "used_dltensor_versioned";
constexpr size_t kCopyAlignment = 256;

std::atomic<uint64_t> exported_count{0};
std::atomic<uint64_t> deleted_count{0};

struct FreeDeleter {
  void operator()(uint8_t* bytes) const { std::free(bytes); }
};

// Everything one exported capsule's struct points at; freed by its deleter,
// which may run on any thread, with or without the GIL.
struct ExportContext {
  std::shared_ptr<const void> owner;           // keeps the exported bytes, shape and strides alive
  std::unique_ptr<uint8_t, FreeDeleter> copy;  // set for copy=True exports
  DLManagedTensor legacy{};
  DLManagedTensorVersioned versioned{};
};

void DeleteLegacy(DLManagedTensor* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
  deleted_count.fetch_add(1, std::memory_order_relaxed);
}

void DeleteVersioned(DLManagedTensorVersioned* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
  deleted_count.fetch_add(1, std::memory_order_relaxed);
}

// Capsule destructors run with the GIL, possibly while the consumer that
// dropped the capsule has an error pending: keep that error intact. A
// consumer that took the capsule renamed it and owns the deleter call.
void DestroyLegacyCapsule(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedLegacyName)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacyName));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (managed->deleter != nullptr) {
    managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

void DestroyVersionedCapsule(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedVersionedName)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed =
      static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (managed->deleter != nullptr) {
    managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

std::string Repr(nb::handle value) { return nb::repr(value).c_str(); }

// (a, b) from a 2-tuple of ints; TypeError naming `what` otherwise.
std::pair<int64_t, int64_t> IntPair(nb::handle value, const char* what) {
  if (!nb::isinstance<nb::tuple>(value) || nb::len(value) != 2) {
    throw nb::type_error(
        absl::StrCat(what, " must be a tuple of two ints, got ", Repr(value)).c_str());
  }
  int64_t first, second;
  if (!nb::try_cast(value[0], first, false) || !nb::try_cast(value[1], second, false)) {
    throw nb::type_error(
        absl::StrCat(what, " must be a tuple of two ints, got ", Repr(value)).c_str());
  }
  return {first, second};
}

// A private, writable copy of all the stored bytes (strides and negative
// offsets stay valid because the layout is kept).
std::unique_ptr<uint8_t, FreeDeleter> CopyStoredBytes(const HeldTensor& held) {
  const uint64_t total = held.info().total_bytes;
  const uint64_t allocated = std::max<uint64_t>(
      kCopyAlignment, (total + kCopyAlignment - 1) / kCopyAlignment * kCopyAlignment);
  auto* bytes = static_cast<uint8_t*>(std::aligned_alloc(kCopyAlignment, allocated));
  if (bytes == nullptr) throw std::bad_alloc();
  const auto* stored = static_cast<const uint8_t*>(held.dl_tensor().data) - held.info().byte_offset;
  if (total > 0) std::memcpy(bytes, stored, total);
  return std::unique_ptr<uint8_t, FreeDeleter>(bytes);
}

}  // namespace

HeldTensor::HeldTensor(Tensor tensor)
    : info_(tensor.info()), managed_(tensor.release_versioned()) {}

HeldTensor::~HeldTensor() {
  if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
}

ExportRequest ParseExportRequest(nb::handle stream, nb::handle max_version, nb::handle dl_device,
                                 nb::handle copy, DLDevice device) {
  ExportRequest request;
  if (device.device_type == kDLCPU) {
    // Host memory has no stream to order work on (array API: only None).
    if (!stream.is_none()) {
      throw nb::value_error(
          absl::StrCat("stream must be None for tensord's CPU tensors, got ", Repr(stream))
              .c_str());
    }
  } else if (!stream.is_none() && !nb::isinstance<nb::int_>(stream)) {
    // Any consumer stream is fine: the bytes are complete before they are
    // handed out (a version is sealed after its producer synchronized).
    throw nb::type_error(
        absl::StrCat("stream must be None or an int (a CUDA stream), got ", Repr(stream)).c_str());
  }
  if (!max_version.is_none()) request.max_version = IntPair(max_version, "max_version");
  if (!dl_device.is_none()) {
    const auto [type, id] = IntPair(dl_device, "dl_device");
    if (type != device.device_type || id != device.device_id) {
      throw nb::buffer_error(absl::StrCat("cannot export to dl_device (", type, ", ", id,
                                          "): this tensor lives on DLPack device (",
                                          static_cast<int>(device.device_type), ", ",
                                          device.device_id,
                                          ") and tensord does not copy between devices")
                                 .c_str());
    }
  }
  if (!copy.is_none()) {
    if (!nb::isinstance<nb::bool_>(copy)) {
      throw nb::type_error(
          absl::StrCat("copy must be True, False or None, got ", Repr(copy)).c_str());
    }
    request.copy = nb::cast<bool>(copy);
  }
  return request;
}

namespace {

// A new capsule over `tensor`, whose memory `owner` keeps alive; `copy`,
// when set, is what `tensor.data` points into.
nb::object MakeCapsule(const DLTensor& tensor, std::shared_ptr<const void> owner,
                       std::unique_ptr<uint8_t, FreeDeleter> copy, const ExportRequest& request,
                       uint64_t versioned_flags) {
  const bool versioned = request.max_version.has_value() && request.max_version->first >= 1;
  auto context = std::make_unique<ExportContext>();
  context->owner = std::move(owner);
  context->copy = std::move(copy);
  PyObject* capsule = nullptr;
  if (versioned) {
    DLManagedTensorVersioned& managed = context->versioned;
    // The newest minor version both sides know (minors are ABI-compatible).
    const uint32_t minor = request.max_version->first == 1
                               ? static_cast<uint32_t>(std::clamp<int64_t>(
                                     request.max_version->second, 0, dlpack::kProducedMinorVersion))
                               : dlpack::kProducedMinorVersion;
    managed.version = DLPackVersion{dlpack::kProducedMajorVersion, minor};
    managed.manager_ctx = context.get();
    managed.deleter = &DeleteVersioned;
    managed.flags = versioned_flags;
    managed.dl_tensor = tensor;
    capsule = PyCapsule_New(&managed, kVersionedName, &DestroyVersionedCapsule);
  } else {
    DLManagedTensor& managed = context->legacy;
    managed.manager_ctx = context.get();
    managed.deleter = &DeleteLegacy;
    managed.dl_tensor = tensor;
    capsule = PyCapsule_New(&managed, kLegacyName, &DestroyLegacyCapsule);
  }
  if (capsule == nullptr) throw nb::python_error();  // the context frees itself
  context.release();  // now owned by the capsule, or by whoever takes it
  exported_count.fetch_add(1, std::memory_order_relaxed);
  return nb::steal<nb::object>(capsule);
}

}  // namespace

nb::object ExportCapsule(const std::shared_ptr<const HeldTensor>& held,
                         const ExportRequest& request) {
  const bool versioned = request.max_version.has_value() && request.max_version->first >= 1;
  const bool make_copy = request.copy.value_or(false);
  const DLDevice device = held->dl_tensor().device;
  const bool on_host = device.device_type == kDLCPU;
  if (make_copy && !on_host) {
    throw nb::buffer_error(absl::StrCat("copy=True of tensor '", held->info().name,
                                        "', which is in device memory (DLPack device (",
                                        static_cast<int>(device.device_type), ", ",
                                        device.device_id,
                                        ")): tensord copies host tensors only; fetch it with "
                                        "device_to_host=True for a host copy")
                               .c_str());
  }
  // A legacy capsule cannot say "read-only", and a consumer that writes
  // would fault on the shared PROT_READ mapping (numpy refuses the same way).
  // Device imports are always flagged read-only, yet device consumers (torch)
  // take legacy capsules only: they get them, and must not write (docs).
  if (!versioned && held->read_only() && !make_copy && on_host) {
    throw nb::buffer_error(
        absl::StrCat("tensor '", held->info().name,
                     "' is a read-only mapping and this consumer takes only legacy "
                     "DLPack capsules, which cannot mark it read-only: pass copy=True "
                     "or fetch with read_only=False")
            .c_str());
  }
  DLTensor tensor = held->dl_tensor();
  std::unique_ptr<uint8_t, FreeDeleter> copy;
  if (make_copy) {
    copy = CopyStoredBytes(*held);
    tensor.data = copy.get() + held->info().byte_offset;
  }
  const uint64_t flags = (held->read_only() && !make_copy ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) |
                         (held->is_copy() || make_copy ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
  // shape and strides point into `held`, which the capsule keeps alive.
  return MakeCapsule(tensor, held, std::move(copy), request, flags);
}

nb::object ExportWritableCapsule(const DLTensor& tensor, std::shared_ptr<const void> owner,
                                 const ExportRequest& request, const char* what) {
  if (request.copy.value_or(false)) {
    throw nb::buffer_error(
        absl::StrCat("copy=True of ", what,
                     ": a copy would not be written back; export it without copy")
            .c_str());
  }
  return MakeCapsule(tensor, std::move(owner), nullptr, request, 0);
}

ExportCounters ReadExportCounters() {
  return ExportCounters{.exported = exported_count.load(), .deleted = deleted_count.load()};
}

}  // namespace tensord::python
