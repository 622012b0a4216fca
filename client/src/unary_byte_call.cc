#include "client/src/unary_byte_call.h"

#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace tensord::unary_byte_call_internal {
namespace {

// gRPC requires a queue to be shut down and emptied before it is destroyed.
class DrainedCompletionQueue {
 public:
  DrainedCompletionQueue() = default;
  DrainedCompletionQueue(const DrainedCompletionQueue&) = delete;
  DrainedCompletionQueue& operator=(const DrainedCompletionQueue&) = delete;
  ~DrainedCompletionQueue() {
    queue_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (queue_.Next(&tag, &ok)) {
    }
  }
  grpc::CompletionQueue& queue() { return queue_; }

 private:
  grpc::CompletionQueue queue_;
};

// Forks in this process's line: a thread's queue made before the last one
// was the parent's (getpid() would be a system call on every call).
std::atomic<uint64_t> forks{0};
void CountForkInChild() { forks.fetch_add(1, std::memory_order_relaxed); }

struct ThreadQueue {
  std::unique_ptr<DrainedCompletionQueue> queue;
  uint64_t made_after_forks = 0;
};

}  // namespace

grpc::CompletionQueue& ThreadCompletionQueue() {
  static const bool counting_forks = ::pthread_atfork(nullptr, nullptr, &CountForkInChild) == 0;
  static_cast<void>(counting_forks);
  thread_local ThreadQueue thread_queue;
  const uint64_t forked = forks.load(std::memory_order_relaxed);
  if (thread_queue.queue == nullptr || thread_queue.made_after_forks != forked) {
    // In a forked child the parent's queue is left alone (released, never
    // shut down here): it was the parent's gRPC's.
    if (thread_queue.queue != nullptr) static_cast<void>(thread_queue.queue.release());
    thread_queue.queue = std::make_unique<DrainedCompletionQueue>();
    thread_queue.made_after_forks = forked;
  }
  return thread_queue.queue->queue();
}

}  // namespace tensord::unary_byte_call_internal
