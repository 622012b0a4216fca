// Threads for the few calls whose work must not occupy a gRPC callback
// thread: a snapshot writes gigabytes, and gRPC runs every reactor of the
// server on a small shared pool.
#ifndef TENSORD_SERVICE_TRANSPORT_CALL_THREADS_H_
#define TENSORD_SERVICE_TRANSPORT_CALL_THREADS_H_

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe. Destruction waits for every piece of work it started.
class CallThreads {
 public:
  CallThreads() = default;
  ~CallThreads();
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

  // Runs `work` on a thread of its own; threads of finished work are joined
  // here, so they never pile up.
  void Run(absl::AnyInvocable<void() &&> work);

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  Mutex mutex_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_CALL_THREADS_H_
