// Keeps a fetched version alive for a stream and for every chunk slice of it
// still inside gRPC, which may release them after the call finished. One
// allocation per fetched version, none per chunk.
#ifndef TENSORD_SERVICE_TRANSPORT_PAYLOAD_HOLD_H_
#define TENSORD_SERVICE_TRANSPORT_PAYLOAD_HOLD_H_

#include <atomic>
#include <cstdint>
#include <utility>

#include "service/registry/tensor_version.h"

namespace tensord {

// Created with one reference (the stream's); each chunk slice adds one,
// dropped by gRPC through UnrefCallback. Deletes itself at zero.
class PayloadHold {
 public:
  // `live_payloads` counts holds alive (TensorService::live_payloads).
  PayloadHold(Lease lease, std::atomic<int64_t>& live_payloads)
      : lease_(std::move(lease)), live_payloads_(live_payloads) {
    live_payloads_.fetch_add(1, std::memory_order_relaxed);
  }
  ~PayloadHold() { live_payloads_.fetch_sub(1, std::memory_order_release); }
  PayloadHold(const PayloadHold&) = delete;
  PayloadHold& operator=(const PayloadHold&) = delete;

  const TensorVersion& version() const { return *lease_; }
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  static void UnrefCallback(void* hold) { static_cast<PayloadHold*>(hold)->Unref(); }

 private:
  Lease lease_;
  std::atomic<int64_t>& live_payloads_;
  std::atomic<int> refs_{1};
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_PAYLOAD_HOLD_H_
