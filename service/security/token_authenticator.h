// Bearer-token authentication and authorization for tensord's RPCs: the one
// place that decides whether a call may proceed. gRPC-free; the transport
// passes in the "authorization" metadata value.
#ifndef TENSORD_SERVICE_SECURITY_TOKEN_AUTHENTICATOR_H_
#define TENSORD_SERVICE_SECURITY_TOKEN_AUTHENTICATOR_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/security/token_file.h"

namespace tensord {

// Immutable after construction, so thread-safe.
class TokenAuthenticator {
 public:
  explicit TokenAuthenticator(std::vector<TokenGrant> grants) : grants_(std::move(grants)) {}

  // The grant of the caller of `rpc`, given its "authorization" metadata
  // ("Bearer <token>"; nullopt when absent). UNAUTHENTICATED when missing,
  // malformed or unknown; PERMISSION_DENIED naming the RPC when the token
  // lacks the RPC's permission (rpc_permissions.h); `name` (the tensor or
  // List prefix, empty when not yet known) is named in that message. The
  // token is compared by SHA-256 digest against every grant in constant time.
  absl::StatusOr<const TokenGrant*> Admit(std::optional<absl::string_view> authorization,
                                          absl::string_view rpc, absl::string_view name = "") const;

  // PERMISSION_DENIED naming the RPC and `name` when `grant` is limited to
  // a prefix that `name` lacks.
  static absl::Status CheckName(const TokenGrant& grant, absl::string_view rpc,
                                absl::string_view name);

  // The prefix a List (or another call over a prefix, `rpc`, named in the
  // refusal) by `grant` runs with: the requested one when it lies inside
  // the grant's namespace, the namespace itself when the request is wider
  // (so "" lists just the caller's names), PERMISSION_DENIED when the two
  // are disjoint.
  static absl::StatusOr<std::string> ListPrefix(const TokenGrant& grant,
                                                absl::string_view requested,
                                                absl::string_view rpc = "List");

 private:
  const std::vector<TokenGrant> grants_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_SECURITY_TOKEN_AUTHENTICATOR_H_
