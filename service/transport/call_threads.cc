#include "service/transport/call_threads.h"

#include <utility>

namespace tensord {

CallThreads::~CallThreads() {
  std::vector<Worker> workers;
  {
    MutexLock lock(&mutex_);
    workers.swap(workers_);
  }
  for (Worker& worker : workers) worker.thread.join();
}

void CallThreads::Run(absl::AnyInvocable<void() &&> work) {
  std::vector<Worker> finished;
  MutexLock lock(&mutex_);
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done->load(std::memory_order_acquire)) {
      finished.push_back(std::move(*it));
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread thread([work = std::move(work), done]() mutable {
    std::move(work)();
    done->store(true, std::memory_order_release);
  });
  workers_.push_back({std::move(thread), std::move(done)});
  // Each has returned from its work; joining is immediate.
  for (Worker& worker : finished) worker.thread.join();
}

}  // namespace tensord
