// TLS material given either inline or as a file path, as ClientOptions and
// the server flags accept it.
#ifndef TENSORD_SERVICE_COMMON_PEM_SOURCE_H_
#define TENSORD_SERVICE_COMMON_PEM_SOURCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

// `value` itself when it holds a PEM block ("-----BEGIN"), else the contents
// of the file it names; "" stays "". Errors name `what` and the path.
absl::StatusOr<std::string> PemFromPathOrContents(absl::string_view value, absl::string_view what);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_PEM_SOURCE_H_
