// Debian's Abseil (20220623) is built with its own absl::string_view rather
// than an alias of std::string_view, so StrCat and friends need a conversion.
#ifndef TENSORD_CLIENT_TENSORCTL_ABSL_VIEW_H_
#define TENSORD_CLIENT_TENSORCTL_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace tensord::tensorctl {

inline absl::string_view AsAbsl(std::string_view text) { return {text.data(), text.size()}; }

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_ABSL_VIEW_H_
