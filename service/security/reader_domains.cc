#include "service/security/reader_domains.h"

#include <algorithm>
#include <memory>

#include "absl/strings/match.h"

namespace tensord {

std::function<std::string(absl::string_view name)> ReaderDomainsOf(
    const std::vector<TokenGrant>& grants) {
  auto prefixes = std::make_shared<std::vector<std::string>>();
  for (const TokenGrant& grant : grants) {
    if (grant.name_prefix.empty()) continue;
    if ((grant.permissions & (kPermissionRead | kPermissionAdmin)) == 0) continue;
    prefixes->push_back(grant.name_prefix);
  }
  if (prefixes->empty()) return nullptr;
  std::sort(prefixes->begin(), prefixes->end());
  prefixes->erase(std::unique(prefixes->begin(), prefixes->end()), prefixes->end());
  return [prefixes](absl::string_view name) {
    std::string domain;
    for (const std::string& prefix : *prefixes) {
      if (!absl::StartsWith(name, prefix)) continue;
      // A name never holds '\n' (tensor_name.h), so the join is unambiguous.
      domain.append(prefix);
      domain.push_back('\n');
    }
    return domain;
  };
}

}  // namespace tensord
