#include "service/transport/handoff_tokens.h"

#include <sys/random.h>

#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/errno_status.h"

namespace tensord {
namespace {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace

absl::Status HandoffScope::Check(absl::string_view name, bool write_access) const {
  if (write_access ? !write : !read) {
    return absl::PermissionDeniedError(
        absl::StrCat("this handoff connection may not ", write_access ? "write" : "read",
                     " tensor '", name, "': the token it redeemed came from a gRPC token without ",
                     write_access ? "write" : "read", " permission"));
  }
  if (!absl::StartsWith(name, name_prefix)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "this handoff connection may use only names starting with '", name_prefix,
        "' (the prefix of the gRPC token its handoff token came from), not '", name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HandoffTokens::Issued> HandoffTokens::Issue(HandoffScope scope) {
  char random[32];
  size_t filled = 0;
  while (filled < sizeof(random)) {
    ssize_t n = ::getrandom(random + filled, sizeof(random) - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "getrandom");
    }
    filled += static_cast<size_t>(n);
  }
  Issued issued{absl::BytesToHexString(absl::string_view(random, sizeof(random))),
                absl::Now() + lifetime_, std::move(scope)};
  MutexLock lock(&mutex_);
  DropExpiredLocked(absl::Now());
  if (outstanding_.size() >= max_outstanding_) {
    return absl::ResourceExhaustedError("too many unredeemed handoff tokens; try again later");
  }
  outstanding_.push_back(issued);
  return issued;
}

std::optional<HandoffScope> HandoffTokens::Redeem(absl::string_view token) {
  MutexLock lock(&mutex_);
  DropExpiredLocked(absl::Now());
  bool found = false;
  size_t found_at = 0;
  // Every token is compared, so timing says nothing about which matched.
  for (size_t i = 0; i < outstanding_.size(); ++i) {
    if (ConstantTimeEquals(outstanding_[i].token, token)) {
      found = true;
      found_at = i;
    }
  }
  if (!found) return std::nullopt;
  HandoffScope scope = std::move(outstanding_[found_at].scope);
  outstanding_.erase(outstanding_.begin() + static_cast<ptrdiff_t>(found_at));
  return scope;
}

void HandoffTokens::DropExpiredLocked(absl::Time now) {
  std::erase_if(outstanding_, [now](const Issued& issued) { return issued.expires <= now; });
}

}  // namespace tensord
