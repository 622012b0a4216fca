#include "service/security/listen_policy.h"

#include <arpa/inet.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tensord {

bool IsLocalOnlyAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) return true;
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return false;
  absl::string_view host = address.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) return false;
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string host_text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, host_text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host_text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;  // another host name or a wildcard: may be reachable remotely
}

absl::Status CheckPlaintextListener(absl::string_view address, bool tls,
                                    bool allow_insecure_remote) {
  if (tls || allow_insecure_remote || IsLocalOnlyAddress(address)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "listen address '", address,
      "' is reachable from other hosts but TLS is off: give --tls-cert and --tls-key, listen on "
      "loopback or a Unix socket, or pass --allow-insecure-remote to serve plaintext anyway"));
}

}  // namespace tensord
