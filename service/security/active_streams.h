// Server-wide accounting of open Put and Fetch streams: a cap on how many
// may be open at once (each pins memory: a reservation or a lease plus gRPC
// buffers) and a watchdog that cancels a stream making no progress for the
// idle timeout, so a stalled client cannot pin memory forever. gRPC-free:
// the transport hands in how to cancel its call.
#ifndef TENSORD_SERVICE_SECURITY_ACTIVE_STREAMS_H_
#define TENSORD_SERVICE_SECURITY_ACTIVE_STREAMS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/common/mutex.h"

namespace tensord {

struct StreamLimits {
  // Most Put and Fetch streams open at once; 0 means no limit.
  int64_t max_streams = 0;
  // A stream with no progress for this long is cancelled; infinite = never.
  absl::Duration idle_timeout = absl::InfiniteDuration();
};

// Thread-safe. Must outlive every StreamSlot it admitted.
class ActiveStreams {
 public:
  class Slot;

  explicit ActiveStreams(const StreamLimits& limits);
  ~ActiveStreams();
  ActiveStreams(const ActiveStreams&) = delete;
  ActiveStreams& operator=(const ActiveStreams&) = delete;

  // Counts a new stream of `rpc` ("Put", "Fetch"). `cancel` is called at most
  // once, from the watchdog thread, when the stream has been idle too long;
  // it must not block on the stream's own callbacks. RESOURCE_EXHAUSTED
  // naming the limit when max_streams are open.
  absl::StatusOr<std::unique_ptr<Slot>> Admit(absl::string_view rpc, std::function<void()> cancel);

  int64_t open_streams() const;

 private:
  struct Entry {
    std::string rpc;
    std::function<void()> cancel;
    std::atomic<int64_t> last_progress_nanos{0};
    bool cancel_started = false;
    // While the watchdog runs `cancel` outside the lock; a slot ending
    // meanwhile on another thread waits for it.
    bool cancel_running = false;
    std::thread::id canceller;
  };

  void Release(uint64_t id);
  void Watch();
  // Cancels the streams idle past the timeout; called by Watch().
  void CancelIdle();

  const StreamLimits limits_;
  mutable Mutex mutex_;
  CondVar changed_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_id_ ABSL_GUARDED_BY(mutex_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread watchdog_;
};

// One admitted stream; releasing it (destruction) frees its place. Destroy
// it before the call it cancels is gone (e.g. in the reactor's OnDone).
class ActiveStreams::Slot {
 public:
  ~Slot() { owner_.Release(id_); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  // The stream moved bytes: restart its idle clock. Cheap (one atomic store).
  void Touch() {
    entry_->last_progress_nanos.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
  }

 private:
  friend class ActiveStreams;
  Slot(ActiveStreams& owner, uint64_t id, Entry* entry) : owner_(owner), id_(id), entry_(entry) {}
  ActiveStreams& owner_;
  const uint64_t id_;
  Entry* const entry_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_SECURITY_ACTIVE_STREAMS_H_
