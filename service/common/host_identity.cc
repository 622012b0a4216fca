#include "service/common/host_identity.h"

#include <fstream>

#include "absl/strings/ascii.h"

namespace tensord {

const std::string& BootId() {
  static const std::string* boot_id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return new std::string(absl::StripAsciiWhitespace(id));
  }();
  return *boot_id;
}

}  // namespace tensord
