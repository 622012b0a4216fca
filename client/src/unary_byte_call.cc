#include "client/src/unary_byte_call.h"

namespace tensord {
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

}  // namespace

grpc::CompletionQueue& ThreadCompletionQueue() {
  thread_local DrainedCompletionQueue thread_queue;
  return thread_queue.queue();
}

}  // namespace tensord
