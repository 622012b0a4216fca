#include "service/common/idle_heap_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "absl/time/clock.h"

namespace tensord {

IdleHeapTrim::IdleHeapTrim(absl::Duration idle_delay)
    : idle_delay_(idle_delay), thread_([this] { Run(); }) {}

IdleHeapTrim::~IdleHeapTrim() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

IdleHeapTrim::Activity::Activity(IdleHeapTrim& owner) : owner_(owner) {
  std::lock_guard<std::mutex> lock(owner_.mutex_);
  ++owner_.active_;
}

IdleHeapTrim::Activity::~Activity() {
  {
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    --owner_.active_;
    owner_.due_ = true;
    owner_.last_end_ = absl::Now();
  }
  owner_.changed_.notify_all();
}

uint64_t IdleHeapTrim::trims() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return trims_;
}

void IdleHeapTrim::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || (due_ && active_ == 0); });
    if (stopping_) return;
    // Quiet for idle_delay since the last transfer ended, none running.
    const absl::Time quiet_at = last_end_ + idle_delay_;
    if (absl::Now() < quiet_at) {
      changed_.wait_for(lock, absl::ToChronoNanoseconds(quiet_at - absl::Now()),
                        [this] { return stopping_; });
      continue;  // re-checks: a transfer may have started or ended meanwhile
    }
    due_ = false;
    lock.unlock();
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
    lock.lock();
    ++trims_;
  }
}

}  // namespace tensord
