#include "service/security/rpc_permissions.h"

#include "service/security/token_file.h"

namespace tensord {
namespace {

constexpr RpcRule kRules[] = {
    {"Fetch", kPermissionRead},
    {"Stat", kPermissionRead},
    {"List", kPermissionRead},
    {"Put", kPermissionWrite},
    {"Delete", kPermissionWrite},
    // Discovery of the handoff socket; carries no tensor data.
    {"GetServerInfo", 0},
    // A handoff token admits its holder to the handoff socket, which
    // serves acquire and create/seal on every name.
    {"IssueHandoffToken", kPermissionRead | kPermissionWrite, /*needs_every_name=*/true},
};

}  // namespace

RpcRule RuleForRpc(absl::string_view rpc) {
  for (const RpcRule& rule : kRules) {
    if (rule.rpc == rpc) return rule;
  }
  return RpcRule{rpc, kPermissionAdmin, /*needs_every_name=*/true};
}

}  // namespace tensord
