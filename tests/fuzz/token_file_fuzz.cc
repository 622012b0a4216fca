// libFuzzer target: ParseTokenFile on arbitrary bytes. Beyond "no crash", an
// accepted file must give sound grants that survive a round trip through the
// hashed form ("sha256:<hex> <permissions> [prefix]"), and the authenticator
// built from them must answer every header without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/strings/str_cat.h"
#include "service/common/tensor_name.h"
#include "service/security/token_authenticator.h"
#include "service/security/token_file.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

std::string HashedLine(const tensord::TokenGrant& grant) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string line = "sha256:";
  for (uint8_t byte : grant.digest) {
    line.push_back(kHex[byte >> 4]);
    line.push_back(kHex[byte & 15]);
  }
  // Every permission bit as its word; "admin" and "cluster" imply read (and
  // admin write), so writing those again is harmless.
  std::string words;
  if (grant.permissions & tensord::kPermissionRead) words += "read,";
  if (grant.permissions & tensord::kPermissionWrite) words += "write,";
  if (grant.permissions & tensord::kPermissionAdmin) words += "admin,";
  if (grant.permissions & tensord::kPermissionCluster) words += "cluster,";
  words.pop_back();
  absl::StrAppend(&line, " ", words);
  if (!grant.name_prefix.empty()) absl::StrAppend(&line, " ", grant.name_prefix);
  return line + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<TokenGrant>> grants = ParseTokenFile(file);
  if (!grants.ok()) {
    Check(grants.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  Check(!grants->empty());
  std::string hashed;
  int previous_line = 0;
  for (const TokenGrant& grant : *grants) {
    constexpr uint8_t kEveryPermission = tensord::kPermissionRead | tensord::kPermissionWrite |
                                         tensord::kPermissionAdmin | tensord::kPermissionCluster;
    Check(grant.permissions != 0 && (grant.permissions & ~kEveryPermission) == 0);
    Check(grant.line > previous_line);
    previous_line = grant.line;
    Check(ValidateNamePrefix(grant.name_prefix).ok());
    hashed += HashedLine(grant);
  }
  absl::StatusOr<std::vector<TokenGrant>> again = ParseTokenFile(hashed);
  Check(again.ok() && again->size() == grants->size());
  for (size_t i = 0; i < grants->size(); ++i) {
    Check((*again)[i].digest == (*grants)[i].digest);
    Check((*again)[i].permissions == (*grants)[i].permissions);
    Check((*again)[i].name_prefix == (*grants)[i].name_prefix);
  }

  // The input itself as an authorization header, against every RPC kind.
  TokenAuthenticator authenticator(std::move(*grants));
  for (absl::string_view rpc : {"Fetch", "Put", "List", "IssueHandoffToken", "Snapshot"}) {
    absl::StatusOr<const TokenGrant*> admitted =
        authenticator.Admit(absl::StrCat("Bearer ", file.substr(0, 64)), rpc);
    if (admitted.ok()) {
      Check(*admitted != nullptr);
      (void)TokenAuthenticator::CheckName(**admitted, rpc, "team-a/x");
      (void)TokenAuthenticator::ListPrefix(**admitted, "team");
    }
  }
  return 0;
}
