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
    // Another node asks this one to copy a version it holds.
    {"Replicate", kPermissionWrite},
    // A producer waits for the copies of a version it sealed locally.
    {"AwaitCopies", kPermissionWrite},
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
