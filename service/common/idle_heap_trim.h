// Hands the heap that large transfers freed back to the kernel once they
// have stopped, instead of after each one. With KeepFreedHeapForTransfers
// glibc keeps freed gRPC receive buffers mapped, so back-to-back puts reuse
// pages already faulted in; a trim after every large put faulted them in
// again for the next (measured: 0.43x -> 0.62x raw TCP at 256 MiB without
// it). An idle server still holds no more heap than glibc's defaults leave.
#ifndef TENSORD_SERVICE_COMMON_IDLE_HEAP_TRIM_H_
#define TENSORD_SERVICE_COMMON_IDLE_HEAP_TRIM_H_

#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe. Runs one thread that calls malloc_trim(0) (glibc only; a
// no-op elsewhere) once no transfer has run for `idle_delay`, and at least
// every `backstop` while none runs (the kept heap may grow from other calls).
class IdleHeapTrim {
 public:
  explicit IdleHeapTrim(absl::Duration idle_delay = absl::Seconds(1),
                        absl::Duration backstop = absl::Seconds(30));
  ~IdleHeapTrim();
  IdleHeapTrim(const IdleHeapTrim&) = delete;
  IdleHeapTrim& operator=(const IdleHeapTrim&) = delete;

  // A transfer while it lives: no trim runs meanwhile, and one is due
  // `idle_delay` after the last has ended.
  class Activity {
   public:
    explicit Activity(IdleHeapTrim& owner);
    ~Activity();
    Activity(const Activity&) = delete;
    Activity& operator=(const Activity&) = delete;

   private:
    IdleHeapTrim& owner_;
  };

  // Trims run so far (for tests).
  uint64_t trims() const;

 private:
  // Steady: a wall-clock step must not delay or hasten a trim.
  using Clock = std::chrono::steady_clock;

  void Run();

  const Clock::duration idle_delay_;
  const Clock::duration backstop_;
  mutable Mutex mutex_;
  CondVar changed_;
  int active_ ABSL_GUARDED_BY(mutex_) = 0;
  // A transfer ended since the last trim.
  bool due_ ABSL_GUARDED_BY(mutex_) = false;
  Clock::time_point last_end_ ABSL_GUARDED_BY(mutex_);
  Clock::time_point last_trim_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  uint64_t trims_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread thread_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_IDLE_HEAP_TRIM_H_
