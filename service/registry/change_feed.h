// The registry's recent changes, in version order, for watchers: a bounded
// history that each watcher reads at its own pace from its own position,
// plus a dispatcher thread that wakes idle watchers when a change arrives.
// A watcher whose position fell out of the history learns exactly which
// versions it may have missed; nothing is skipped silently.
#ifndef TENSORD_SERVICE_REGISTRY_CHANGE_FEED_H_
#define TENSORD_SERVICE_REGISTRY_CHANGE_FEED_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "service/common/mutex.h"
#include "service/registry/version_info.h"

namespace tensord {

// One change: a publish (one version, or an atomic group's versions), a
// delete, or an eviction pass.
struct ChangeEvent {
  enum class Kind { kPublished, kDeleted, kEvicted };
  Kind kind = Kind::kPublished;
  // Where the change stands in the registry's order: a publish's version;
  // a delete or an eviction takes a number of its own from the same
  // counter, so every change has a distinct position to resume after.
  uint64_t version = 0;
  // Published: the new versions. Deleted/evicted: the versions removed.
  // Most changes are of one version: it lives inside the event, which is
  // one allocation for a publish instead of two.
  absl::InlinedVector<VersionInfo, 1> items;
  bool atomic_group = false;
};

// What a watcher at `after` reads next.
struct ChangeRead {
  // In version order; empty when the watcher is up to date.
  std::vector<std::shared_ptr<const ChangeEvent>> events;
  // When the history no longer holds every change after the watcher's
  // position: changes in (missed_after, missed_to] may have been dropped,
  // and `events` continue after missed_to. Both 0 otherwise.
  uint64_t missed_after = 0;
  uint64_t missed_to = 0;
};

class ChangeFeed {
 public:
  // Keeps the changes of at least the last `history_items` items (every
  // change counts its items; the newest change is kept whatever its size).
  explicit ChangeFeed(size_t history_items);
  ~ChangeFeed();
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  // Adds a change whose version exceeds every earlier one's; callers
  // serialise (the registry appends under its lock, in version order).
  void Append(ChangeEvent event);

  // Drops the history and treats every change up to `version` as missed:
  // after a restore, where the restored versions are not changes a watcher
  // saw, and positions from before the restart are reported as behind.
  void RestartHistoryAt(uint64_t version);

  // Up to `max_events` changes after version `after`.
  ChangeRead ReadAfter(uint64_t after, size_t max_events) const;

  // The version after which the history is complete: a watcher positioned
  // at or past it has missed nothing.
  uint64_t complete_after() const;
  size_t history_items() const { return history_items_; }

  // Calls `wake` (from the feed's dispatcher thread, never under the
  // registry's lock) after changes are appended, until the returned
  // subscription is destroyed. `wake` must not block; destroying the
  // subscription waits for a running `wake` to return (unless it is
  // destroyed from inside one).
  class Subscription;
  std::unique_ptr<Subscription> Subscribe(std::function<void()> wake);

 private:
  struct Subscriber {
    std::function<void()> wake;
    // Unsubscribed from inside a wake: erased by the dispatcher once no
    // wake runs, since erasing it would destroy the running function.
    bool removed = false;
  };
  void Dispatch();
  void Unsubscribe(std::list<Subscriber>::iterator subscriber);

  const size_t history_items_;

  mutable Mutex mutex_;
  std::deque<std::shared_ptr<const ChangeEvent>> history_ ABSL_GUARDED_BY(mutex_);
  size_t items_in_history_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t complete_after_ ABSL_GUARDED_BY(mutex_) = 0;

  // Wakes the dispatcher: appended_ counts appends, stopping_ ends it.
  Mutex signal_mutex_;
  CondVar appended_signal_;
  uint64_t appended_ ABSL_GUARDED_BY(signal_mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(signal_mutex_) = false;

  // Held while subscribers are woken, so unsubscribing waits for a wake
  // in progress. Taken before mutex_, never under it.
  Mutex dispatch_mutex_ ABSL_ACQUIRED_BEFORE(mutex_);
  std::list<Subscriber> subscribers_ ABSL_GUARDED_BY(dispatch_mutex_);
  std::thread::id dispatcher_id_;
  std::thread dispatcher_;  // started by the first Subscribe
};

class ChangeFeed::Subscription {
 public:
  ~Subscription() { feed_.Unsubscribe(subscriber_); }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  friend class ChangeFeed;
  Subscription(ChangeFeed& feed, std::list<Subscriber>::iterator subscriber)
      : feed_(feed), subscriber_(subscriber) {}
  ChangeFeed& feed_;
  const std::list<Subscriber>::iterator subscriber_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_CHANGE_FEED_H_
