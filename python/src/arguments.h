// Python argument values as the C++ client's types; ValueError naming the
// value when one is out of range.
#ifndef TENSORD_PYTHON_SRC_ARGUMENTS_H_
#define TENSORD_PYTHON_SRC_ARGUMENTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "tensord/client.h"
#include "tensord/retention.h"

namespace tensord::python {

// "None or a positive int" as the C++ API's 0-or-version.
uint64_t VersionArgument(std::optional<int64_t> version);

// "auto", "remote", "local".
TransferPath PathArgument(const std::string& path);

// "default", "pinned", "cache" (the names RetentionName gives).
Retention RetentionArgument(const std::string& retention);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_ARGUMENTS_H_
