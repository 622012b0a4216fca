#include "service/common/pem_source.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"

namespace tensord {

absl::StatusOr<std::string> PemFromPathOrContents(absl::string_view value, absl::string_view what) {
  if (value.empty() || absl::StrContains(value, "-----BEGIN")) return std::string(value);
  const std::string path(value);
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, absl::StrCat("cannot open ", what, " file ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (!absl::StrContains(contents.str(), "-----BEGIN")) {
    return absl::InvalidArgumentError(absl::StrCat(what, " file ", path, " holds no PEM block"));
  }
  return contents.str();
}

}  // namespace tensord
