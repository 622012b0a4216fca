#include "python/src/status_error.h"

#include <string>

namespace tensord::python {
namespace {

namespace nb = nanobind;

// tensord.Error; a strong reference for the life of the process.
PyObject* error_class = nullptr;

void TranslateStatusError(const std::exception_ptr& exception, void*) {
  try {
    std::rethrow_exception(exception);
  } catch (const StatusError& error) {
    const absl::Status& status = error.status();
    const std::string message(status.message());
    PyObject* error_type = error_class != nullptr ? error_class : PyExc_RuntimeError;
    PyObject* instance = error_class != nullptr
                             ? PyObject_CallFunction(error_class, "is", static_cast<int>(status.code()),
                                                     message.c_str())
                             : PyUnicode_FromString(status.ToString().c_str());
    if (instance == nullptr) return;  // the call's own error stays pending
    PyErr_SetObject(error_type, instance);
    Py_DECREF(instance);
  }
}

}  // namespace

void RegisterStatusErrorTranslator(nb::module_& module) {
  nb::register_exception_translator(&TranslateStatusError);
  module.def(
      "_set_error_class",
      [](nb::handle cls) {
        if (!PyType_Check(cls.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                                                          reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
          throw nb::type_error("_set_error_class needs an Exception subclass");
        }
        Py_XDECREF(error_class);
        error_class = cls.inc_ref().ptr();
      },
      "Sets the exception class raised for failed calls (done by tensord/__init__.py).");
}

}  // namespace tensord::python
