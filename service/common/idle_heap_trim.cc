#include "service/common/idle_heap_trim.h"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tensord {

IdleHeapTrim::IdleHeapTrim(absl::Duration idle_delay, absl::Duration backstop)
    : idle_delay_(absl::ToChronoNanoseconds(idle_delay)),
      backstop_(absl::ToChronoNanoseconds(backstop)),
      last_trim_(Clock::now()),
      thread_([this] { Run(); }) {}

IdleHeapTrim::~IdleHeapTrim() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  changed_.SignalAll();
  thread_.join();
}

IdleHeapTrim::Activity::Activity(IdleHeapTrim& owner) : owner_(owner) {
  MutexLock lock(&owner_.mutex_);
  ++owner_.active_;
}

IdleHeapTrim::Activity::~Activity() {
  {
    MutexLock lock(&owner_.mutex_);
    --owner_.active_;
    owner_.due_ = true;
    owner_.last_end_ = Clock::now();
  }
  owner_.changed_.SignalAll();
}

uint64_t IdleHeapTrim::trims() const {
  MutexLock lock(&mutex_);
  return trims_;
}

void IdleHeapTrim::Run() {
  MutexLock lock(&mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    // Due after a transfer: once none runs and the last ended idle_delay
    // ago. Otherwise every backstop, whatever grew the heap meanwhile.
    Clock::time_point trim_at = last_trim_ + backstop_;
    if (due_) trim_at = std::min(trim_at, last_end_ + idle_delay_);
    if (active_ > 0 || now < trim_at) {
      changed_.WaitWithTimeout(&mutex_, absl::FromChrono(active_ > 0 ? backstop_ : trim_at - now));
      continue;  // re-checks: a transfer may have started or ended meanwhile
    }
    due_ = false;
    mutex_.Unlock();
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
    mutex_.Lock();
    last_trim_ = Clock::now();
    ++trims_;
  }
}

}  // namespace tensord
