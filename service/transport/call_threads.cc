#include "service/transport/call_threads.h"

#include <exception>
#include <new>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tensord {

CallThreads::~CallThreads() {
  std::vector<Worker> workers;
  {
    MutexLock lock(&mutex_);
    workers.swap(workers_);
  }
  for (Worker& worker : workers) worker.thread.join();
}

absl::Status CallThreads::Run(absl::AnyInvocable<void() &&> work) {
  MutexLock lock(&mutex_);
  // Each finished one has returned from its work: joining is immediate.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done->load(std::memory_order_acquire)) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  if (workers_.size() >= max_running_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(workers_.size(), " are still running (at most ", max_running_, ")"));
  }
  // Nothing may throw once the thread runs: make room first.
  try {
    workers_.reserve(workers_.size() + 1);
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread thread([work = std::move(work), done]() mutable {
      std::move(work)();
      done->store(true, std::memory_order_release);
    });
    workers_.push_back({std::move(thread), std::move(done)});
  } catch (const std::system_error& error) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot start a thread: ", error.what()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("cannot start a thread: out of memory");
  }
  return absl::OkStatus();
}

}  // namespace tensord
