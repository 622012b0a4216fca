// absl::Status failures surface in Python as tensord.Error(code, message).
#ifndef TENSORD_PYTHON_SRC_STATUS_ERROR_H_
#define TENSORD_PYTHON_SRC_STATUS_ERROR_H_

#include <exception>
#include <utility>

#include <nanobind/nanobind.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tensord::python {

// Carries a failed status from C++ code to the exception translator.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status) : status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return "tensord status error"; }

 private:
  absl::Status status_;
};

// The value of `result`, or throws StatusError.
template <typename T>
T ValueOrThrow(absl::StatusOr<T> result) {
  if (!result.ok()) throw StatusError(std::move(result).status());
  return *std::move(result);
}

// A tensord.Error instance for `status`, not raised: the per-item failures
// that batch calls return alongside the items that succeeded.
nanobind::object StatusErrorObject(const absl::Status& status);

// Makes StatusError raise `error_class(code, message)` (tensord.Error, which
// tensord/__init__.py defines and passes in once at import).
void RegisterStatusErrorTranslator(nanobind::module_& module);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_STATUS_ERROR_H_
