#include "service/security/token_authenticator.h"

#include <openssl/crypto.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/security/rpc_permissions.h"

namespace tensord {
namespace {

std::string PermissionNames(uint8_t permissions) {
  std::string names;
  if (permissions & kPermissionRead) names = "read";
  if (permissions & kPermissionWrite) absl::StrAppend(&names, names.empty() ? "" : ",", "write");
  if (permissions & kPermissionCluster)
    absl::StrAppend(&names, names.empty() ? "" : ",", "cluster");
  if (permissions & kPermissionAdmin) absl::StrAppend(&names, names.empty() ? "" : ",", "admin");
  return names;
}

}  // namespace

absl::StatusOr<const TokenGrant*> TokenAuthenticator::Admit(
    std::optional<absl::string_view> authorization, absl::string_view rpc,
    absl::string_view name) const {
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(rpc, " needs an 'authorization: Bearer <token>' header; none was sent"));
  }
  absl::string_view value = *authorization;
  if (value.size() < 7 || !absl::EqualsIgnoreCase(value.substr(0, 7), "Bearer ")) {
    return absl::UnauthenticatedError(
        absl::StrCat(rpc, ": the authorization header is not 'Bearer <token>'"));
  }
  const TokenDigest presented = DigestToken(absl::StripLeadingAsciiWhitespace(value.substr(7)));
  // Every grant is compared, and without branching on bytes, so timing
  // tells nothing about which digest (if any) was close.
  const TokenGrant* match = nullptr;
  for (const TokenGrant& grant : grants_) {
    const bool equal = CRYPTO_memcmp(grant.digest.data(), presented.data(), presented.size()) == 0;
    if (equal) match = &grant;
  }
  if (match == nullptr) {
    return absl::UnauthenticatedError(absl::StrCat(rpc, ": the bearer token is not known"));
  }
  const RpcRule rule = RuleForRpc(rpc);
  const bool admin = (match->permissions & kPermissionAdmin) != 0;
  if (!admin && (match->permissions & rule.permissions) != rule.permissions) {
    return absl::PermissionDeniedError(
        absl::StrCat(rpc, name.empty() ? "" : absl::StrCat(" of '", absl::CEscape(name), "'"),
                     " needs permission ", PermissionNames(rule.permissions),
                     "; the token (tokens file line ", match->line, ") has ",
                     match->permissions == 0 ? "none" : PermissionNames(match->permissions)));
  }
  if (rule.needs_every_name && !match->name_prefix.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(rpc, " reaches every name; the token (tokens file line ", match->line,
                     ") is limited to names starting with '", match->name_prefix, "'"));
  }
  return match;
}

absl::Status TokenAuthenticator::CheckName(const TokenGrant& grant, absl::string_view rpc,
                                           absl::string_view name) {
  if (absl::StartsWith(name, grant.name_prefix)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      rpc, " of '", absl::CEscape(name), "' is not allowed: the token (tokens file line ",
      grant.line, ") is limited to names starting with '", grant.name_prefix, "'"));
}

absl::StatusOr<std::string> TokenAuthenticator::ListPrefix(const TokenGrant& grant,
                                                           absl::string_view requested,
                                                           absl::string_view rpc) {
  if (absl::StartsWith(requested, grant.name_prefix)) return std::string(requested);
  if (absl::StartsWith(grant.name_prefix, requested)) return grant.name_prefix;
  return absl::PermissionDeniedError(
      absl::StrCat(rpc, " of prefix '", absl::CEscape(requested),
                   "' is not allowed: the token (tokens file line ", grant.line,
                   ") is limited to names starting with '", grant.name_prefix, "'"));
}

}  // namespace tensord
