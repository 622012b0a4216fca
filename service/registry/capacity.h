// Byte budgets: a put reserves its bytes before any byte moves, and the
// reservation lives as long as the version it became.
#ifndef TENSORD_SERVICE_REGISTRY_CAPACITY_H_
#define TENSORD_SERVICE_REGISTRY_CAPACITY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tensord {

class ByteReservation;

// A byte limit shared by every reservation made against it. Thread-safe.
class CapacityAccount : public std::enable_shared_from_this<CapacityAccount> {
 public:
  // `what` names the budget in errors, e.g. "host memory (--max-host-bytes)".
  static std::shared_ptr<CapacityAccount> Create(uint64_t limit_bytes, std::string what);

  // RESOURCE_EXHAUSTED, naming the request, what is used and the limit, when
  // `bytes` do not fit.
  absl::StatusOr<ByteReservation> Reserve(uint64_t bytes);

  uint64_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit_bytes() const { return limit_; }

 private:
  friend class ByteReservation;
  CapacityAccount(uint64_t limit, std::string what) : limit_(limit), what_(std::move(what)) {}
  void Return(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  const uint64_t limit_;
  const std::string what_;
  std::atomic<uint64_t> used_{0};
};

// Move-only hold on bytes of a CapacityAccount; gives them back when destroyed.
class ByteReservation {
 public:
  ByteReservation() = default;
  ~ByteReservation() { Reset(); }
  ByteReservation(ByteReservation&& other) noexcept
      : account_(std::move(other.account_)), bytes_(std::exchange(other.bytes_, 0)) {}
  ByteReservation& operator=(ByteReservation&& other) noexcept {
    if (this != &other) {
      Reset();
      account_ = std::move(other.account_);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ByteReservation(const ByteReservation&) = delete;
  ByteReservation& operator=(const ByteReservation&) = delete;

  uint64_t bytes() const { return bytes_; }
  void Reset() {
    if (account_ != nullptr) account_->Return(bytes_);
    account_.reset();
    bytes_ = 0;
  }

 private:
  friend class CapacityAccount;
  ByteReservation(std::shared_ptr<CapacityAccount> account, uint64_t bytes)
      : account_(std::move(account)), bytes_(bytes) {}

  std::shared_ptr<CapacityAccount> account_;
  uint64_t bytes_ = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_CAPACITY_H_
