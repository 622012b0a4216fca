// Ends the leases of dropped tensors in batches, off the dropping thread: a
// tensor's destructor only queues its lease id. The connection's next
// request carries the queued ids (HandoffRequest.release_lease_ids), so the
// server ends them before serving it at no round trip of their own; ids that
// no request carried within one or two ticks of a millisecond are sent by a
// thread of the releaser's own, in one ReleaseRequest (up to
// kMaxLeasesPerRelease each). Dropping the 1024 tensors of a batch costs no
// round trip on the caller's thread, and at most one on the releaser's.
#ifndef TENSORD_CLIENT_SRC_LEASE_RELEASER_H_
#define TENSORD_CLIENT_SRC_LEASE_RELEASER_H_

#include <cstdint>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe.
class LeaseReleaser {
 public:
  // Sends every queued id (Take, send, Sent until Take is empty); called on
  // the releaser's thread.
  using Drain = std::function<void()>;

  // The thread's tick: queued ids wait one to two ticks for a request to
  // carry them before the thread drains them.
  static constexpr absl::Duration kDefaultDelay = absl::Milliseconds(1);

  explicit LeaseReleaser(Drain drain, absl::Duration delay = kDefaultDelay);
  // Stops the thread; ids still queued are not sent (the owner closes the
  // connection next, which ends every lease it held).
  ~LeaseReleaser();
  LeaseReleaser(const LeaseReleaser&) = delete;
  LeaseReleaser& operator=(const LeaseReleaser&) = delete;

  // Queues `lease_id`; the thread starts on the first call. In a forked
  // child, whose leases are its parent's, nothing is queued or sent. When
  // the thread cannot start (no memory or mapping left for its stack) the
  // ids wait for the connection's next request, and the next call tries
  // again.
  void Release(uint64_t lease_id);
  // Release of each id, under one lock.
  void Release(std::span<const uint64_t> lease_ids);

  // The next ids to send, at most kMaxLeasesPerRelease; empty when none.
  std::vector<uint64_t> Take();
  // `count` ids of a Take were sent and answered (or their connection broke).
  void Sent(size_t count);

  // Returns once every id queued before the call has been sent and
  // answered: for callers that must see the server's lease counts settle.
  // Returns at once when the thread cannot start.
  void Flush();

 private:
  void Run();
  // Queues `lease_id`; whether the thread must be woken.
  bool QueueLocked(uint64_t lease_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void StartThreadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Drain drain_;
  const absl::Duration delay_;
  const uint64_t owner_fork_generation_;
  Mutex mutex_;
  CondVar queued_;  // something to send, a full batch, or stopping
  CondVar sent_;    // ids were answered
  std::vector<uint64_t> pending_ ABSL_GUARDED_BY(mutex_);
  uint64_t queued_total_ ABSL_GUARDED_BY(mutex_) = 0;  // ids queued so far
  uint64_t sent_total_ ABSL_GUARDED_BY(mutex_) = 0;    // of those, answered
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // The thread ticks every `delay_` while ids come and go, and sleeps until
  // the next id after kIdleTicksBeforeSleep ticks with none.
  static constexpr int kIdleTicksBeforeSleep = 100;
  uint64_t tick_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t first_queued_tick_ ABSL_GUARDED_BY(mutex_) = 0;  // of the oldest queued id
  bool asleep_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_LEASE_RELEASER_H_
