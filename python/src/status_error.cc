#include "python/src/status_error.h"

#include <string>

namespace tensord::python {
namespace {

namespace nb = nanobind;

// tensord.Error; a strong reference for the life of the process.
PyObject* error_class = nullptr;

// A new reference to `error_class(code, message)` (a RuntimeError before
// tensord/__init__.py set the class), or nullptr with a Python error pending.
PyObject* NewErrorInstance(const absl::Status& status) {
  if (error_class == nullptr)
    return PyObject_CallFunction(PyExc_RuntimeError, "s", status.ToString().c_str());
  const std::string message(status.message());
  return PyObject_CallFunction(error_class, "is", static_cast<int>(status.code()), message.c_str());
}

void TranslateStatusError(const std::exception_ptr& exception, void*) {
  try {
    std::rethrow_exception(exception);
  } catch (const StatusError& error) {
    PyObject* instance = NewErrorInstance(error.status());
    if (instance == nullptr) return;  // the call's own error stays pending
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance)), instance);
    Py_DECREF(instance);
  }
}

}  // namespace

nb::object StatusErrorObject(const absl::Status& status) {
  PyObject* instance = NewErrorInstance(status);
  if (instance == nullptr) throw nb::python_error();
  return nb::steal(instance);
}

void RegisterStatusErrorTranslator(nb::module_& module) {
  nb::register_exception_translator(&TranslateStatusError);
  module.def(
      "_set_error_class",
      [](nb::handle cls) {
        if (!PyType_Check(cls.ptr()) ||
            !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                              reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
          throw nb::type_error("_set_error_class needs an Exception subclass");
        }
        Py_XDECREF(error_class);
        error_class = cls.inc_ref().ptr();
      },
      "Sets the exception class raised for failed calls (done by tensord/__init__.py).");
}

}  // namespace tensord::python
