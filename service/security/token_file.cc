#include "service/security/token_file.h"

#include <openssl/evp.h>

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/common/errno_status.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

constexpr absl::string_view kDigestPrefix = "sha256:";

bool IsVisibleAscii(absl::string_view text) {
  for (char c : text) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

absl::StatusOr<TokenDigest> ParseHexDigest(absl::string_view hex, int line) {
  TokenDigest digest{};
  if (hex.size() != 2 * digest.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokens file line ", line, ": sha256 digest has ", hex.size(), " hex digits, want 64"));
  }
  for (size_t i = 0; i < digest.size(); ++i) {
    uint8_t byte = 0;
    for (char c : hex.substr(2 * i, 2)) {
      const char lower = absl::ascii_tolower(c);
      int nibble = -1;
      if (lower >= '0' && lower <= '9') nibble = lower - '0';
      if (lower >= 'a' && lower <= 'f') nibble = lower - 'a' + 10;
      if (nibble < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokens file line ", line, ": sha256 digest has a non-hex digit"));
      }
      byte = static_cast<uint8_t>(byte << 4 | nibble);
    }
    digest[i] = byte;
  }
  return digest;
}

absl::StatusOr<uint8_t> ParsePermissions(absl::string_view text, int line) {
  uint8_t permissions = 0;
  for (absl::string_view word : absl::StrSplit(text, ',')) {
    if (word == "read") {
      permissions |= kPermissionRead;
    } else if (word == "write") {
      permissions |= kPermissionWrite;
    } else if (word == "admin") {
      permissions |= kPermissionRead | kPermissionWrite | kPermissionAdmin;
    } else if (word == "cluster") {
      // A node reads what it copies.
      permissions |= kPermissionRead | kPermissionCluster;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("tokens file line ", line, ": permission '",
                                                     absl::CEscape(word),
                                                     "' is not read, write, cluster or admin"));
    }
  }
  return permissions;
}

absl::StatusOr<TokenGrant> ParseGrantLine(absl::string_view text, int line) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() < 2 || fields.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file line ", line, " has ", fields.size(),
                     " fields; want '<token> <permissions> [<name-prefix>]'"));
  }
  TokenGrant grant;
  grant.line = line;
  absl::string_view token = fields[0];
  if (absl::ConsumePrefix(&token, kDigestPrefix)) {
    absl::StatusOr<TokenDigest> digest = ParseHexDigest(token, line);
    if (!digest.ok()) return digest.status();
    grant.digest = *digest;
  } else {
    // The token itself is never quoted back: a typo'd line may hold a real one.
    if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat("tokens file line ", line, ": token has ",
                                                     token.size(), " characters, want ",
                                                     kMinTokenBytes, "..", kMaxTokenBytes));
    }
    if (!IsVisibleAscii(token)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line, ": token has a non-printable character"));
    }
    grant.digest = DigestToken(token);
  }
  absl::StatusOr<uint8_t> permissions = ParsePermissions(fields[1], line);
  if (!permissions.ok()) return permissions.status();
  grant.permissions = *permissions;
  if (fields.size() == 3) {
    if (absl::Status status = ValidateNamePrefix(fields[2]); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line, ": name prefix: ", status.message()));
    }
    // A namespace is whole path segments: "team-a" would also grant
    // "team-ab/x" and "team-a-secrets".
    if (!absl::EndsWith(fields[2], "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line, ": name prefix '", fields[2],
                       "' must end with '/' (a namespace such as 'team-a/')"));
    }
    grant.name_prefix = std::string(fields[2]);
  }
  return grant;
}

}  // namespace

TokenDigest DigestToken(absl::string_view token) {
  TokenDigest digest{};
  unsigned int size = 0;
  // EVP_Digest cannot fail for SHA-256 on in-memory input short of OOM, in
  // which case the zero digest matches no stored grant.
  EVP_Digest(token.data(), token.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

absl::StatusOr<std::vector<TokenGrant>> ParseTokenFile(absl::string_view contents) {
  std::vector<TokenGrant> grants;
  absl::flat_hash_set<std::string> seen;
  int line = 0;
  for (absl::string_view text : absl::StrSplit(contents, '\n')) {
    ++line;
    text = absl::StripAsciiWhitespace(text);
    if (text.empty() || text.front() == '#') continue;
    absl::StatusOr<TokenGrant> grant = ParseGrantLine(text, line);
    if (!grant.ok()) return grant.status();
    std::string key(grant->digest.begin(), grant->digest.end());
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line, " repeats the token of an earlier line"));
    }
    grants.push_back(std::move(*grant));
  }
  if (grants.empty()) {
    return absl::InvalidArgumentError("tokens file has no tokens; every call would be refused");
  }
  return grants;
}

absl::StatusOr<std::vector<TokenGrant>> LoadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, absl::StrCat("cannot open tokens file ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  absl::StatusOr<std::vector<TokenGrant>> grants = ParseTokenFile(contents.str());
  if (!grants.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", grants.status().message()));
  }
  return grants;
}

}  // namespace tensord
