#include "client/src/watch_stream.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>

#include <grpcpp/support/client_callback.h>
#include "absl/strings/str_cat.h"

#include "client/src/info_conversion.h"
#include "service/common/mutex.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

absl::StatusOr<WatchEvent::Kind> KindFromProto(v1::WatchEvent::Kind kind) {
  switch (kind) {
    case v1::WatchEvent::PUBLISHED: return WatchEvent::Kind::kPublished;
    case v1::WatchEvent::DELETED: return WatchEvent::Kind::kDeleted;
    case v1::WatchEvent::EVICTED: return WatchEvent::Kind::kEvicted;
    default: break;
  }
  return absl::InternalError(
      absl::StrCat("the server sent a watch event of unknown kind ", static_cast<int>(kind)));
}

// gRPC may run a reaction inline in the thread that starts an operation, so
// StartRead and RemoveHold are always called with mutex_ released.
class GrpcWatchStream final : public WatchStream, public grpc::ClientReadReactor<grpc::ByteBuffer> {
 public:
  GrpcWatchStream(std::unique_ptr<CallContext> context, size_t max_buffered_events)
      : context_(std::move(context)), max_buffered_(std::max<size_t>(max_buffered_events, 1)) {}

  ~GrpcWatchStream() override {
    context_->get().TryCancel();
    ReleaseHold();
    MutexLock lock(&mutex_);
    while (!done_) changed_.Wait(&mutex_);
  }

  // Starts the call; waits up to `timeout` for the first message.
  absl::Status Begin(grpc::ChannelInterface* channel, const grpc::internal::RpcMethod& method,
                     const v1::WatchRequest& request, absl::Duration timeout) {
    request_ = SerializeToByteBuffer(request);
    grpc::internal::ClientCallbackReaderFactory<grpc::ByteBuffer>::Create(
        channel, method, &context_->get(), &request_, this);
    // Held until reading ends, so OnDone cannot run while Next may still
    // resume reading.
    AddHold();
    StartRead(&response_);
    StartCall();
    const absl::Time deadline = absl::Now() + timeout;
    MutexLock lock(&mutex_);
    while (!first_message_ && !done_ && !changed_.WaitWithDeadline(&mutex_, deadline)) {
    }
    if (first_message_) return absl::OkStatus();
    if (done_) return final_status_;
    return absl::DeadlineExceededError(
        absl::StrCat("the server did not start the watch within ", absl::FormatDuration(timeout)));
  }

  absl::StatusOr<WatchEvent> Next(absl::Duration timeout) override {
    bool resume = false;
    absl::StatusOr<WatchEvent> next = absl::UnknownError("unset");
    {
      const absl::Time deadline = absl::Now() + timeout;
      MutexLock lock(&mutex_);
      while (queue_.empty() && !done_ && !reading_ended_) {
        if (changed_.WaitWithDeadline(&mutex_, deadline) && queue_.empty() && !done_ &&
            !reading_ended_) {
          return absl::DeadlineExceededError(
              absl::StrCat("no watch event within ", absl::FormatDuration(timeout)));
        }
      }
      if (queue_.empty()) {
        // Reading ended: the final status arrives with OnDone.
        while (!done_) changed_.Wait(&mutex_);
        return final_status_;
      }
      Queued queued = std::move(queue_.front());
      queue_.pop_front();
      if (queued.position_after != 0) position_ = std::max(position_, queued.position_after);
      if (paused_ && queue_.size() <= max_buffered_ / 2) {
        paused_ = false;
        resume = true;
      }
      next = std::move(queued.event);
    }
    if (resume) StartRead(&response_);
    return next;
  }

  uint64_t position() const override {
    MutexLock lock(&mutex_);
    return position_;
  }

  void Cancel() override { context_->get().TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        MutexLock lock(&mutex_);
        reading_ended_ = true;
      }
      changed_.SignalAll();
      ReleaseHold();
      return;
    }
    // Parsed and freed in this thread: a message of thousands of items
    // filled by one gRPC thread and freed by another would cost TSan (and
    // nothing else) a report check per item.
    v1::WatchResponse response;
    absl::Status parsed = ParseFromByteBuffer(response_, response, "watch response");
    response_.Clear();
    bool read_on = false;
    {
      MutexLock lock(&mutex_);
      first_message_ = true;
      if (absl::Status taken = parsed.ok() ? TakeLocked(response) : parsed; !taken.ok()) {
        final_status_override_ = taken;
        context_->get().TryCancel();
      }
      if (queue_.size() < max_buffered_) {
        read_on = true;
      } else {
        paused_ = true;
      }
    }
    changed_.SignalAll();
    if (read_on) StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    MutexLock lock(&mutex_);
    final_status_ = final_status_override_.value_or(FromGrpcStatus(status));
    if (final_status_.ok()) {
      final_status_ = absl::UnavailableError("the server ended the watch");
    }
    done_ = true;
    // Under the lock: the destructor may free this as soon as it sees done_.
    changed_.SignalAll();
  }

 private:
  struct Queued {
    WatchEvent event;
    // position() once this event is taken (0: unchanged).
    uint64_t position_after = 0;
  };

  absl::Status TakeLocked(const v1::WatchResponse& response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (response.has_fell_behind()) {
      WatchEvent missed;
      missed.kind = WatchEvent::Kind::kFellBehind;
      missed.version = response.fell_behind().resumed_at();
      missed.missed_after = response.fell_behind().missed_after();
      queue_.push_back({std::move(missed), response.fell_behind().resumed_at()});
    }
    for (const v1::WatchEvent& proto : response.events()) {
      absl::StatusOr<WatchEvent::Kind> kind = KindFromProto(proto.kind());
      if (!kind.ok()) return kind.status();
      if (!partial_.has_value()) {
        WatchEvent event;
        event.kind = *kind;
        event.version = proto.version();
        event.atomic_group = proto.atomic_group();
        event.existing = proto.existing();
        partial_ = std::move(event);
      } else if (partial_->version != proto.version() || partial_->kind != *kind) {
        return absl::InternalError(absl::StrCat("the server continued watch event ",
                                                partial_->version, " with event ",
                                                proto.version()));
      }
      for (const v1::TensorInfo& item : proto.items()) {
        absl::StatusOr<TensorInfo> info = InfoFromProto(item);
        if (!info.ok()) return info.status();
        partial_->items.push_back(*std::move(info));
      }
      if (proto.continues()) continue;
      const uint64_t position_after = partial_->existing ? 0 : partial_->version;
      queue_.push_back({*std::move(partial_), position_after});
      partial_.reset();
    }
    // The message's position covers changes that matched nothing: it
    // becomes the position once its last event is taken, or now when it
    // brought none (and nothing earlier is waiting).
    if (response.position() != 0 && !partial_.has_value()) {
      if (!queue_.empty()) {
        queue_.back().position_after = std::max(queue_.back().position_after, response.position());
      } else {
        position_ = std::max(position_, response.position());
      }
    }
    return absl::OkStatus();
  }

  void ReleaseHold() {
    {
      MutexLock lock(&mutex_);
      if (hold_released_) return;
      hold_released_ = true;
    }
    RemoveHold();
  }

  const std::unique_ptr<CallContext> context_;
  const size_t max_buffered_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;  // one read in flight at a time

  mutable Mutex mutex_;
  CondVar changed_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mutex_);
  // A change whose items continue.
  std::optional<WatchEvent> partial_ ABSL_GUARDED_BY(mutex_);
  uint64_t position_ ABSL_GUARDED_BY(mutex_) = 0;
  bool first_message_ ABSL_GUARDED_BY(mutex_) = false;
  bool paused_ ABSL_GUARDED_BY(mutex_) = false;
  bool reading_ended_ ABSL_GUARDED_BY(mutex_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mutex_) = false;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mutex_);
  std::optional<absl::Status> final_status_override_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<WatchStream>> StartWatchStream(
    grpc::ChannelInterface* channel, const grpc::internal::RpcMethod& method,
    std::unique_ptr<CallContext> context, const v1::WatchRequest& request,
    size_t max_buffered_events, absl::Duration start_timeout) {
  auto stream = std::make_unique<GrpcWatchStream>(std::move(context), max_buffered_events);
  if (absl::Status started = stream->Begin(channel, method, request, start_timeout);
      !started.ok()) {
    return started;  // the destructor cancels and waits for gRPC
  }
  return stream;
}

}  // namespace tensord
