#include "python/src/dlpack_import.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tensord::python {
namespace {

namespace nb = nanobind;

std::string TypeName(nb::handle value) { return nb::type_name(value.type()).c_str(); }

bool IsHostDevice(int32_t device_type) {
  return device_type == kDLCPU || device_type == kDLCUDAHost;
}

// The producer's capsule: __dlpack__(max_version=(1, 1)), or __dlpack__()
// for producers whose __dlpack__ takes no max_version (torch 1.13, numpy 1.x).
nb::object RequestCapsule(nb::handle producer) {
  nb::object method = nb::getattr(producer, "__dlpack__");
  PyObject* capsule = nullptr;
  {
    nb::dict kwargs;
    kwargs["max_version"] =
        nb::make_tuple(dlpack::kProducedMajorVersion, dlpack::kProducedMinorVersion);
    capsule = PyObject_Call(method.ptr(), nb::tuple().ptr(), kwargs.ptr());
  }
  if (capsule == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
    PyErr_Clear();
    capsule = PyObject_CallNoArgs(method.ptr());
    if (capsule == nullptr) throw nb::python_error();
  }
  return nb::steal<nb::object>(capsule);
}

}  // namespace

ImportedTensor::~ImportedTensor() {
  if (legacy_ != nullptr && legacy_->deleter != nullptr) legacy_->deleter(legacy_);
  if (versioned_ != nullptr && versioned_->deleter != nullptr) versioned_->deleter(versioned_);
}

ImportedTensor ImportDlpack(nb::handle producer, const char* call) {
  if (!nb::hasattr(producer, "__dlpack__")) {
    throw nb::type_error(absl::StrCat(call,
                                      " needs an object with __dlpack__ (a DLPack producer), got ",
                                      TypeName(producer))
                             .c_str());
  }
  // Check the device before asking for a capsule, as the array API's
  // from_dlpack does, so a device tensor is never exported for nothing.
  if (nb::hasattr(producer, "__dlpack_device__")) {
    nb::object device = producer.attr("__dlpack_device__")();
    int32_t device_type = 0;
    if (nb::isinstance<nb::tuple>(device) && nb::len(device) == 2 &&
        nb::try_cast(device[0], device_type, true) && !IsHostDevice(device_type)) {
      throw nb::buffer_error(absl::StrCat(call, " takes host tensors only; the ",
                                          TypeName(producer), " is on DLPack device ",
                                          nb::repr(device).c_str())
                                 .c_str());
    }
  }
  nb::object capsule = RequestCapsule(producer);
  PyObject* raw = capsule.ptr();
  if (PyCapsule_IsValid(raw, "dltensor_versioned")) {
    auto* managed =
        static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(raw, "dltensor_versioned"));
    if (PyCapsule_SetName(raw, "used_dltensor_versioned") != 0) throw nb::python_error();
    ImportedTensor imported(nullptr, managed);
    if (managed->version.major != dlpack::kProducedMajorVersion) {
      throw nb::buffer_error(absl::StrCat("the ", TypeName(producer), " exported DLPack version ",
                                          managed->version.major, ".", managed->version.minor,
                                          "; tensord reads major version ",
                                          dlpack::kProducedMajorVersion)
                                 .c_str());
    }
    return imported;
  }
  if (PyCapsule_IsValid(raw, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(raw, "dltensor"));
    if (PyCapsule_SetName(raw, "used_dltensor") != 0) throw nb::python_error();
    return ImportedTensor(managed, nullptr);
  }
  throw nb::type_error(
      absl::StrCat("__dlpack__ of the ", TypeName(producer),
                   " returned neither a 'dltensor' nor a 'dltensor_versioned' capsule")
          .c_str());
}

}  // namespace tensord::python
