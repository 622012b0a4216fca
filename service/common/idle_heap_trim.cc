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
    owner_.last_end_ = Clock::now();
  }
  owner_.changed_.notify_all();
}

uint64_t IdleHeapTrim::trims() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return trims_;
}

void IdleHeapTrim::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    // Due after a transfer: once none runs and the last ended idle_delay
    // ago. Otherwise every backstop, whatever grew the heap meanwhile.
    Clock::time_point trim_at = last_trim_ + backstop_;
    if (due_) trim_at = std::min(trim_at, last_end_ + idle_delay_);
    if (active_ > 0 || now < trim_at) {
      changed_.wait_until(lock, active_ > 0 ? now + backstop_ : trim_at);
      continue;  // re-checks: a transfer may have started or ended meanwhile
    }
    due_ = false;
    lock.unlock();
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
    lock.lock();
    last_trim_ = Clock::now();
    ++trims_;
  }
}

}  // namespace tensord
