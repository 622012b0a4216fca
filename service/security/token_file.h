// The tokens file (--tokens-file): which bearer tokens may call which RPCs,
// optionally limited to a name prefix. Parsing is separate from use so the
// parser can be unit-tested and fuzzed on untrusted text.
//
// Format, one grant per line; blank lines and lines starting with '#' are
// ignored, fields are separated by spaces or tabs:
//
//   <token> <permissions> [<name-prefix>]
//
// <token> is the bearer token itself (16..4096 visible ASCII characters) or
// "sha256:" followed by the 64 hex digits of its SHA-256 digest, so the file
// need not hold the secret. <permissions> is a comma list of read, write,
// cluster (a node of the cluster: copies between nodes) and admin. <name-prefix>, when present,
// limits the token to names starting with it (a namespace such as "team-a/").
#ifndef TENSORD_SERVICE_SECURITY_TOKEN_FILE_H_
#define TENSORD_SERVICE_SECURITY_TOKEN_FILE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

// Bits of TokenGrant::permissions.
enum Permission : uint8_t {
  kPermissionRead = 1,
  kPermissionWrite = 2,
  // Every RPC, including administrative ones; implies read and write.
  kPermissionAdmin = 4,
  // A cluster node's calls to another: Replicate, copies by cluster order,
  // cache-copy places. What --cluster-token-file's token is granted.
  kPermissionCluster = 8,
};

using TokenDigest = std::array<uint8_t, 32>;

struct TokenGrant {
  // SHA-256 of the token; plaintext tokens are hashed when parsed, so the
  // server never keeps them.
  TokenDigest digest{};
  uint8_t permissions = 0;
  // Empty: every name.
  std::string name_prefix;
  // 1-based line in the file, for logs (never the token).
  int line = 0;
};

inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 4096;

// SHA-256 of `token`.
TokenDigest DigestToken(absl::string_view token);

// INVALID_ARGUMENT naming the line and the bad field (never a token) for a
// malformed line, an unknown permission, a bad prefix or a repeated token.
// An empty file (no grants) is an error too: it would lock everyone out.
absl::StatusOr<std::vector<TokenGrant>> ParseTokenFile(absl::string_view contents);

// Reads and parses `path`; NOT_FOUND / PERMISSION_DENIED naming the path
// when it cannot be read.
absl::StatusOr<std::vector<TokenGrant>> LoadTokenFile(const std::string& path);

}  // namespace tensord

#endif  // TENSORD_SERVICE_SECURITY_TOKEN_FILE_H_
