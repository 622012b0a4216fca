// Debian's Abseil (20220623) is built with its own absl::string_view rather
// than an alias of std::string_view, so StrCat and friends need a conversion.
#ifndef TENSORD_SERVICE_COMMON_ABSL_VIEW_H_
#define TENSORD_SERVICE_COMMON_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace tensord {

inline absl::string_view AsAbsl(std::string_view text) { return {text.data(), text.size()}; }
inline std::string_view AsStd(absl::string_view text) { return {text.data(), text.size()}; }

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_ABSL_VIEW_H_
