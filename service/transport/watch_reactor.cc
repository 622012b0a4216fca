// Watch: each watcher reads the registry's change feed from its own
// position, one message in flight at a time. The feed's dispatcher wakes an
// idle watcher when changes arrive; a watcher that is still writing picks
// them up when its write completes, so a slow reader holds no copies, only
// a position, and learns from the feed what it missed if the history moved
// past it.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/common/mutex.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"
#include "service/transport/call_record.h"
#include "service/transport/tensor_service.h"
#include "service/wire/batch_limits.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

// Changes read from the feed per step; a step that matches nothing reads on.
constexpr size_t kChangesPerRead = 1024;

// Roughly what an item adds to a message: its name and fixed fields.
size_t EstimatedItemBytes(const VersionInfo& info) {
  return info.name.size() + 96 + 16 * info.layout.shape.size();
}

v1::WatchEvent::Kind KindToProto(ChangeEvent::Kind kind) {
  switch (kind) {
    case ChangeEvent::Kind::kPublished: return v1::WatchEvent::PUBLISHED;
    case ChangeEvent::Kind::kDeleted: return v1::WatchEvent::DELETED;
    case ChangeEvent::Kind::kEvicted: return v1::WatchEvent::EVICTED;
  }
  return v1::WatchEvent::KIND_UNSPECIFIED;
}

class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchResponse> {
 public:
  WatchReactor(grpc::CallbackServerContext* context, const v1::WatchRequest& request,
               Registry& registry, const ServerOptions& options, ServiceMetrics& metrics,
               TensorService& service, OpenWatches& watches)
      : feed_(&registry.changes()),
        metrics_(metrics),
        watches_(watches),
        message_budget_(options.chunk_bytes),
        call_(Rpc::kWatch, *context, metrics, CallRecord::IdEcho::kAtStart) {
    absl::StatusOr<bool> started = Start(context, request, registry, options, service);
    if (!started.ok()) {
      MutexLock lock(&mutex_);
      FinishLocked(started.status());
      return;
    }
    if (*started) Subscribe();
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mutex_);
    writing_ = false;
    if (finished_) return;
    if (!ok) {
      FinishLocked(absl::CancelledError("the watcher went away"));
      return;
    }
    if (end_status_.has_value()) {
      FinishLocked(*end_status_);
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    MutexLock lock(&mutex_);
    EndLocked(absl::CancelledError("the watcher cancelled"));
  }

  void OnDone() override {
    // Not under mutex_: destroying the subscription waits for a running
    // wake, which takes mutex_.
    subscription_.reset();
    if (watch_id_ != 0) watches_.Close(watch_id_);
    absl::Status outcome;
    {
      MutexLock lock(&mutex_);
      outcome = outcome_;
      metrics_.AddWatchEventsSent(events_sent_);
    }
    call_.End(outcome);
    delete this;
  }

 private:
  // Checks the request and takes the start position. True when started;
  // false when a cluster watch's start is read from etcd off this thread
  // (Started() goes on from there).
  absl::StatusOr<bool> Start(grpc::CallbackServerContext* context, const v1::WatchRequest& request,
                             Registry& registry, const ServerOptions& options,
                             TensorService& service) {
    TENSORD_ASSIGN_OR_RETURN(const TokenGrant* grant,
                             service.AdmitCall(context, "Watch", request.prefix()));
    TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(request.prefix()));
    if (request.send_existing() && request.from_version() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "watch of '", request.prefix(), "': send_existing and from_version ",
          request.from_version(), " exclude each other (resuming needs no existing versions)"));
    }
    // A token limited to a namespace watches only inside it.
    if (grant == nullptr) {
      prefix_ = request.prefix();
    } else {
      TENSORD_ASSIGN_OR_RETURN(prefix_,
                               TokenAuthenticator::ListPrefix(*grant, request.prefix(), "Watch"));
    }
    TENSORD_ASSIGN_OR_RETURN(watch_id_, watches_.Open([this](const absl::Status& status) {
      MutexLock lock(&mutex_);
      EndLocked(status);
    }));
    if (!request.cluster()) {
      TENSORD_ASSIGN_OR_RETURN(WatchStart start,
                               registry.StartWatch(prefix_, request.send_existing(),
                                                   request.from_version(), kBatchItemLimit));
      MutexLock lock(&mutex_);
      position_ = start.position;
      existing_ = std::move(start.existing);
      return true;
    }
    // Every node's durable publishes and deletes, positioned by etcd revision.
    ClusterAccess* cluster = options.cluster_access.get();
    feed_ = cluster == nullptr ? nullptr : cluster->ClusterChanges();
    if (feed_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("watch of '", request.prefix(),
                       "' with cluster=true needs a cluster; this server is "
                       "a single node (start it with --etcd-endpoints)"));
    }
    {
      // Held like a write in flight: an end meanwhile waits for the start.
      MutexLock lock(&mutex_);
      writing_ = true;
    }
    cluster->StartClusterWatch(
        prefix_, request.send_existing(), request.from_version(), kBatchItemLimit,
        [this](absl::StatusOr<WatchStart> start) { Started(std::move(start)); });
    return false;
  }

  void Started(absl::StatusOr<WatchStart> start) {
    if (start.ok()) {
      {
        MutexLock lock(&mutex_);
        position_ = start->position;
        existing_ = std::move(start->existing);
      }
      // writing_ is still set: nothing finishes the call meanwhile, and a
      // wake now leaves the first message to the lines below.
      subscription_ = feed_->Subscribe([this] { Pump(); });
    }
    MutexLock lock(&mutex_);
    writing_ = false;
    if (end_status_.has_value()) {
      FinishLocked(*end_status_);
      return;
    }
    if (!start.ok()) {
      FinishLocked(start.status());
      return;
    }
    WriteNextLocked();
  }

  // Subscribed after the start position was taken: changes appended in
  // between are in the feed past that position, and Pump reads them.
  void Subscribe() {
    subscription_ = feed_->Subscribe([this] { Pump(); });
    Pump();
  }

  // The feed's wake: writes when idle.
  void Pump() {
    MutexLock lock(&mutex_);
    if (!writing_ && !finished_ && !end_status_.has_value()) WriteNextLocked();
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    response_.Clear();
    if (!FillLocked()) return;
    writing_ = true;
    StartWrite(&response_);
  }

  // The next message: the start (existing versions, then `started`), or the
  // changes after position_ that match the prefix. False when there is
  // nothing to send.
  bool FillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    size_t bytes = 0;
    if (!started_) {
      while (next_existing_ < existing_.size() && bytes < message_budget_) {
        const VersionInfo& info = existing_[next_existing_++];
        v1::WatchEvent* event = response_.add_events();
        event->set_kind(v1::WatchEvent::PUBLISHED);
        event->set_version(info.version);
        event->set_existing(true);
        InfoToProto(info, event->add_items());
        bytes += EstimatedItemBytes(info);
      }
      events_sent_ += response_.events_size();
      if (next_existing_ == existing_.size()) {
        existing_ = {};
        started_ = true;
        response_.set_started(true);
      }
      response_.set_position(position_);
      return true;
    }
    // Bounded: each step moves position_ forward over changes in the feed.
    for (;;) {
      if (pending_ != nullptr) {
        if (!AppendPendingLocked(bytes)) break;
        continue;
      }
      ChangeRead read = feed_->ReadAfter(position_, kChangesPerRead);
      if (read.missed_to != 0) {
        // What matched so far, or an earlier missed range, goes first: one
        // report per message, so none overwrites another.
        if (response_.events_size() > 0 || response_.has_fell_behind()) break;
        v1::WatchFellBehind* fell_behind = response_.mutable_fell_behind();
        fell_behind->set_missed_after(read.missed_after);
        fell_behind->set_resumed_at(read.missed_to);
        fell_behind->set_history_items(feed_->history_items());
        metrics_.AddWatchFellBehind();
        position_ = read.missed_to;
      }
      if (read.events.empty()) break;
      for (std::shared_ptr<const ChangeEvent>& change : read.events) {
        if (bytes >= message_budget_) break;
        pending_ = std::move(change);
        pending_item_ = 0;
        if (!AppendPendingLocked(bytes)) break;
      }
      if (bytes >= message_budget_ || pending_ != nullptr) break;
    }
    if (response_.events_size() == 0 && !response_.has_fell_behind()) return false;
    events_sent_ += response_.events_size();
    response_.set_position(position_);
    return true;
  }

  // Adds pending_'s items that match the prefix, from pending_item_ on,
  // within the message budget. True when the change is done (pending_
  // cleared, position_ past it); false when the message is full.
  bool AppendPendingLocked(size_t& bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const ChangeEvent& change = *pending_;
    v1::WatchEvent* event = nullptr;
    for (; pending_item_ < change.items.size(); ++pending_item_) {
      const VersionInfo& item = change.items[pending_item_];
      if (!absl::StartsWith(item.name, prefix_)) continue;
      if (bytes >= message_budget_) {
        // A change too big for one message continues in the next.
        if (event != nullptr) event->set_continues(true);
        return false;
      }
      if (event == nullptr) {
        event = response_.add_events();
        event->set_kind(KindToProto(change.kind));
        event->set_version(change.version);
        event->set_atomic_group(change.atomic_group);
      }
      InfoToProto(item, event->add_items());
      bytes += EstimatedItemBytes(item);
    }
    position_ = change.version;
    pending_ = nullptr;
    return true;
  }

  // Ends the watch with `status` once no write is in flight.
  void EndLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (finished_ || end_status_.has_value()) return;
    if (writing_) {
      end_status_ = status;  // OnWriteDone finishes
      return;
    }
    FinishLocked(status);
  }

  void FinishLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (finished_) return;
    finished_ = true;
    outcome_ = status;
    Finish(ToGrpcStatus(status));
  }

  // The registry's changes, or the cluster's for a cluster watch.
  ChangeFeed* feed_;
  ServiceMetrics& metrics_;
  OpenWatches& watches_;
  const size_t message_budget_;
  CallRecord call_;
  std::string prefix_;
  uint64_t watch_id_ = 0;
  std::unique_ptr<ChangeFeed::Subscription> subscription_;

  Mutex mutex_;
  uint64_t position_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<VersionInfo> existing_ ABSL_GUARDED_BY(mutex_);
  size_t next_existing_ ABSL_GUARDED_BY(mutex_) = 0;
  bool started_ ABSL_GUARDED_BY(mutex_) = false;
  // A change partly sent: its items from pending_item_ on are still due.
  std::shared_ptr<const ChangeEvent> pending_ ABSL_GUARDED_BY(mutex_);
  size_t pending_item_ ABSL_GUARDED_BY(mutex_) = 0;
  v1::WatchResponse response_ ABSL_GUARDED_BY(mutex_);
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  std::optional<absl::Status> end_status_ ABSL_GUARDED_BY(mutex_);
  absl::Status outcome_ ABSL_GUARDED_BY(mutex_);
  uint64_t events_sent_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace

grpc::ServerWriteReactor<v1::WatchResponse>* TensorService::Watch(
    grpc::CallbackServerContext* context, const v1::WatchRequest* request) {
  return new WatchReactor(context, *request, registry_, options_, metrics_, *this, watches_);
}

}  // namespace tensord
