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
#include "absl/status/status.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe. Destruction waits for every piece of work it started.
class CallThreads {
 public:
  // At most `max_running` pieces of work run at once.
  explicit CallThreads(size_t max_running) : max_running_(max_running) {}
  ~CallThreads();
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

  // Runs `work` on a thread of its own. RESOURCE_EXHAUSTED (and `work` is
  // dropped unrun) when max_running pieces are still running or no thread
  // can be started. Threads of finished work are joined here, so they never
  // pile up.
  absl::Status Run(absl::AnyInvocable<void() &&> work);

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  const size_t max_running_;
  Mutex mutex_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_CALL_THREADS_H_
