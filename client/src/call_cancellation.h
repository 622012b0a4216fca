// CallCancellation's state, and the hook a call registers with it for as
// long as it runs (a gRPC context's TryCancel).
#ifndef TENSORD_CLIENT_SRC_CALL_CANCELLATION_H_
#define TENSORD_CLIENT_SRC_CALL_CANCELLATION_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/common/mutex.h"
#include "tensord/client.h"

namespace tensord {

struct CallCancellation::State {
  Mutex mutex;
  bool cancelled ABSL_GUARDED_BY(mutex) = false;
  uint64_t next_id ABSL_GUARDED_BY(mutex) = 0;
  absl::flat_hash_map<uint64_t, std::function<void()>> hooks ABSL_GUARDED_BY(mutex);
};

// While it lives, Cancel() of its cancellation runs `on_cancel` (at once,
// here, when it was cancelled already). `on_cancel` must not block: it runs
// under the cancellation's lock. Move-only; empty without a cancellation.
class CancellationHook {
 public:
  CancellationHook() = default;
  CancellationHook(const CallCancellation* cancellation, std::function<void()> on_cancel);
  ~CancellationHook();
  CancellationHook(CancellationHook&& other) noexcept
      : state_(std::exchange(other.state_, nullptr)), id_(other.id_) {}
  CancellationHook& operator=(CancellationHook&& other) noexcept {
    std::swap(state_, other.state_);
    std::swap(id_, other.id_);
    return *this;
  }

 private:
  CallCancellation::State* state_ = nullptr;
  uint64_t id_ = 0;
};

// INVALID_ARGUMENT naming a timeout that is not positive or a request id
// outside the rules.
absl::Status ValidateCallOptions(const CallOptions& call);

// CANCELLED naming `what` when the call's cancellation was cancelled.
absl::Status CheckNotCancelled(const CallOptions& call, absl::string_view what);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_CALL_CANCELLATION_H_
