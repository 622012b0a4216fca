#include "service/security/rpc_permissions.h"

#include "service/security/token_file.h"

namespace tensord {
namespace {

constexpr RpcRule kRules[] = {
    {"Fetch", kPermissionRead},
    {"FetchInline", kPermissionRead},
    {"Stat", kPermissionRead},
    {"List", kPermissionRead},
    {"BatchFetch", kPermissionRead},
    {"Watch", kPermissionRead},
    {"Put", kPermissionWrite},
    {"PutPart", kPermissionWrite},
    {"BatchPut", kPermissionWrite},
    {"Delete", kPermissionWrite},
    // Between the nodes of a cluster: copies, and where cache copies are.
    // A node's identity, not a reader's or writer's.
    {"Replicate", kPermissionCluster},
    {"Fetch(cluster)", kPermissionCluster},
    {"AnnounceCopies", kPermissionCluster},
    {"LocateCopy", kPermissionCluster},
    // Discovery of the handoff socket; carries no tensor data.
    {"GetServerInfo", 0},
    // A handoff token admits its holder to the handoff socket with the
    // caller's own permissions and prefix (HandoffScope); one with neither
    // read nor write gets nothing to do there, and is refused by the call.
    {"IssueHandoffToken", 0},
};

}  // namespace

RpcRule RuleForRpc(absl::string_view rpc) {
  for (const RpcRule& rule : kRules) {
    if (rule.rpc == rpc) return rule;
  }
  return RpcRule{rpc, kPermissionAdmin, /*needs_every_name=*/true};
}

}  // namespace tensord
