#include "service/cluster/work_pool.h"

#include <algorithm>
#include <utility>

namespace tensord {

WorkPool::WorkPool(size_t threads) {
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
    threads_.emplace_back([this] { Loop(); });
  }
}

WorkPool::~WorkPool() {
  std::deque<Job> abandoned;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    abandoned.swap(queue_);
    ready_.SignalAll();
  }
  for (std::thread& thread : threads_) thread.join();
  for (Job& job : abandoned) {
    if (job.abandon) std::move(job.abandon)();
  }
}

void WorkPool::Run(Work work, Work abandon) {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back(Job{std::move(work), std::move(abandon)});
      ready_.Signal();
      return;
    }
  }
  if (abandon) std::move(abandon)();
}

size_t WorkPool::queued() const {
  MutexLock lock(&mu_);
  return queue_.size();
}

void WorkPool::Loop() {
  while (true) {
    Work work;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) ready_.Wait(&mu_);
      if (stopping_) return;
      work = std::move(queue_.front().work);
      queue_.pop_front();
    }
    std::move(work)();
  }
}

}  // namespace tensord
