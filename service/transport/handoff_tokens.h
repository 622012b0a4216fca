// Single-use, short-lived tokens that let a peer the allow-list does not
// name use the handoff socket, after it proved itself over gRPC.
#ifndef TENSORD_SERVICE_TRANSPORT_HANDOFF_TOKENS_H_
#define TENSORD_SERVICE_TRANSPORT_HANDOFF_TOKENS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/common/mutex.h"

namespace tensord {

// What one handoff connection may do with names. A peer on the allow-list
// may read and write every name; a peer that redeemed a token, what the
// gRPC caller that was issued it may (its token's permissions and prefix).
struct HandoffScope {
  bool read = true;
  bool write = true;
  std::string name_prefix;  // empty: every name

  // PERMISSION_DENIED naming `name`, the access and the connection's
  // prefix unless the scope allows it.
  absl::Status Check(absl::string_view name, bool write_access) const;
};

// Thread-safe.
class HandoffTokens {
 public:
  explicit HandoffTokens(absl::Duration lifetime = absl::Seconds(30), size_t max_outstanding = 1024)
      : lifetime_(lifetime), max_outstanding_(max_outstanding) {}

  struct Issued {
    std::string token;  // 64 hex digits from getrandom(2)
    absl::Time expires;
    HandoffScope scope;
  };
  // A token that admits its redeemer with `scope`. RESOURCE_EXHAUSTED when
  // max_outstanding unexpired tokens exist.
  absl::StatusOr<Issued> Issue(HandoffScope scope = {});

  // The scope of `token` (which is spent) when it was issued and has not
  // expired or been redeemed. Compares in constant time.
  std::optional<HandoffScope> Redeem(absl::string_view token);

 private:
  void DropExpiredLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const absl::Duration lifetime_;
  const size_t max_outstanding_;
  Mutex mutex_;
  std::vector<Issued> outstanding_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_HANDOFF_TOKENS_H_
