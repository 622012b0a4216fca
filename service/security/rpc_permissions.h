// What each tensord RPC needs from a caller's token. One table: an RPC added
// to the service gets a row here; an RPC without a row needs admin.
#ifndef TENSORD_SERVICE_SECURITY_RPC_PERMISSIONS_H_
#define TENSORD_SERVICE_SECURITY_RPC_PERMISSIONS_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace tensord {

struct RpcRule {
  absl::string_view rpc;  // method name within tensord.v1.TensorService
  // Permission bits (token_file.h) the token must hold, all of them; 0 means
  // any known token.
  uint8_t permissions = 0;
  // The RPC reaches every name (e.g. a handoff token opens the whole handoff
  // protocol), so a token limited to a name prefix may not call it.
  bool needs_every_name = false;
};

// The rule for `rpc`; unknown RPCs get {rpc, admin}.
RpcRule RuleForRpc(absl::string_view rpc);

}  // namespace tensord

#endif  // TENSORD_SERVICE_SECURITY_RPC_PERMISSIONS_H_
