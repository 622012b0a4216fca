#include "client/src/call_cancellation.h"

#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/wire/request_id.h"

namespace tensord {

CallCancellation::CallCancellation() : state_(std::make_unique<State>()) {}
CallCancellation::~CallCancellation() = default;

void CallCancellation::Cancel() {
  MutexLock lock(&state_->mutex);
  if (state_->cancelled) return;
  state_->cancelled = true;
  for (auto& [id, on_cancel] : state_->hooks) on_cancel();
}

bool CallCancellation::cancelled() const {
  MutexLock lock(&state_->mutex);
  return state_->cancelled;
}

CancellationHook::CancellationHook(const CallCancellation* cancellation,
                                   std::function<void()> on_cancel) {
  if (cancellation == nullptr) return;
  CallCancellation::State& state = cancellation->state();
  MutexLock lock(&state.mutex);
  if (state.cancelled) {
    on_cancel();
    return;
  }
  state_ = &state;
  id_ = state.next_id++;
  state.hooks.emplace(id_, std::move(on_cancel));
}

CancellationHook::~CancellationHook() {
  if (state_ == nullptr) return;
  MutexLock lock(&state_->mutex);
  state_->hooks.erase(id_);
}

absl::Status ValidateCallOptions(const CallOptions& call) {
  if (call.timeout.has_value() && *call.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CallOptions::timeout ", absl::FormatDuration(*call.timeout), " must be positive"));
  }
  if (!call.request_id.empty() && !IsValidRequestId(call.request_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CallOptions::request_id '",
                     absl::CHexEscape(call.request_id.substr(0, kMaxRequestIdLength + 1)),
                     "' is not 1..", kMaxRequestIdLength, " characters of [A-Za-z0-9._:/+=-]"));
  }
  return absl::OkStatus();
}

absl::Status CheckNotCancelled(const CallOptions& call, absl::string_view what) {
  if (call.cancellation != nullptr && call.cancellation->cancelled()) {
    return absl::CancelledError(absl::StrCat(what, " was cancelled (CallCancellation)"));
  }
  return absl::OkStatus();
}

}  // namespace tensord
