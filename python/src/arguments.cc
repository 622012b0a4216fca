#include "python/src/arguments.h"

#include <nanobind/nanobind.h>

#include "absl/strings/str_cat.h"

namespace tensord::python {

namespace nb = nanobind;

uint64_t VersionArgument(std::optional<int64_t> version) {
  if (!version.has_value()) return 0;
  if (*version < 1) {
    throw nb::value_error(
        absl::StrCat("version must be None or a positive int, got ", *version).c_str());
  }
  return static_cast<uint64_t>(*version);
}

TransferPath PathArgument(const std::string& path) {
  if (path == "auto") return TransferPath::kAuto;
  if (path == "remote") return TransferPath::kRemote;
  if (path == "local") return TransferPath::kLocal;
  throw nb::value_error(
      absl::StrCat("path must be 'auto', 'remote' or 'local', got '", path, "'").c_str());
}

Retention RetentionArgument(const std::string& retention) {
  for (Retention known : {Retention::kDefault, Retention::kPinned, Retention::kCache}) {
    if (retention == RetentionName(known)) return known;
  }
  throw nb::value_error(
      absl::StrCat("retention must be 'default', 'pinned' or 'cache', got '", retention, "'")
          .c_str());
}

}  // namespace tensord::python
