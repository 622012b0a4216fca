// Project-prefixed status macros: Debian's Abseil (20220623) has none.
#ifndef TENSORD_SERVICE_COMMON_STATUS_MACROS_H_
#define TENSORD_SERVICE_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TENSORD_INTERNAL_CONCAT_INNER(a, b) a##b
#define TENSORD_INTERNAL_CONCAT(a, b) TENSORD_INTERNAL_CONCAT_INNER(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define TENSORD_RETURN_IF_ERROR(expr)                                   \
  do {                                                                  \
    if (absl::Status tensord_status_ = (expr); !tensord_status_.ok()) { \
      return tensord_status_;                                           \
    }                                                                   \
  } while (false)

// `TENSORD_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value of a StatusOr
// or returns its error from the enclosing function.
#define TENSORD_ASSIGN_OR_RETURN(lhs, expr) \
  TENSORD_INTERNAL_ASSIGN_OR_RETURN(TENSORD_INTERNAL_CONCAT(tensord_statusor_, __LINE__), lhs, expr)

#define TENSORD_INTERNAL_ASSIGN_OR_RETURN(statusor, lhs, expr) \
  auto statusor = (expr);                                      \
  if (!statusor.ok()) {                                        \
    return std::move(statusor).status();                       \
  }                                                            \
  lhs = std::move(statusor).value()

#endif  // TENSORD_SERVICE_COMMON_STATUS_MACROS_H_
