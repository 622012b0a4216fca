#include "service/registry/capacity.h"

#include "absl/strings/str_cat.h"

namespace tensord {

std::shared_ptr<CapacityAccount> CapacityAccount::Create(uint64_t limit_bytes, std::string what) {
  return std::shared_ptr<CapacityAccount>(new CapacityAccount(limit_bytes, std::move(what)));
}

absl::StatusOr<ByteReservation> CapacityAccount::Reserve(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  while (true) {
    if (bytes > limit_ || used > limit_ - bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot reserve ", bytes, " bytes of ",
                                                       what_, ": ", used, " of ", limit_,
                                                       " bytes are in use"));
    }
    if (used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed)) break;
  }
  return ByteReservation(shared_from_this(), bytes);
}

}  // namespace tensord
