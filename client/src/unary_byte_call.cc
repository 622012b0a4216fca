#include "client/src/unary_byte_call.h"

#include <cstdint>

#include "client/src/fork_generation.h"

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

struct ThreadQueue {
  std::unique_ptr<DrainedCompletionQueue> queue;
  uint64_t made_after_forks = 0;
};

}  // namespace

grpc::CompletionQueue& ThreadCompletionQueue() {
  thread_local ThreadQueue thread_queue;
  // A thread's queue made before the last fork was the parent's.
  const uint64_t forked = ForkGeneration();
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
