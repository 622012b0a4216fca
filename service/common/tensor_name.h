// The rules for tensor names, shared by every entry point.
#ifndef TENSORD_SERVICE_COMMON_TENSOR_NAME_H_
#define TENSORD_SERVICE_COMMON_TENSOR_NAME_H_

#include <cstddef>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace tensord {

inline constexpr size_t kMaxTensorNameBytes = 256;

// 1..kMaxTensorNameBytes bytes of [A-Za-z0-9_.:/-], not starting with '/',
// with no empty, "." or ".." path segment. Names double as file names in
// snapshots and as prefixes for namespaces, so nothing path-like may escape.
// INVALID_ARGUMENT names the offending name (escaped) and the reason.
absl::Status ValidateTensorName(absl::string_view name);

// Same charset and length for a List prefix, which may be empty or end in '/'.
absl::Status ValidateNamePrefix(absl::string_view prefix);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_TENSOR_NAME_H_
