#include "client/src/unary_byte_call.h"

#include <grpcpp/completion_queue.h>
#include <grpcpp/support/async_unary_call.h>

#include <memory>

namespace tensord {
namespace {

// A thread's queue, drained as the thread ends: gRPC requires a queue to be
// shut down and emptied before it is destroyed.
class ThreadCompletionQueue {
 public:
  ThreadCompletionQueue() = default;
  ThreadCompletionQueue(const ThreadCompletionQueue&) = delete;
  ThreadCompletionQueue& operator=(const ThreadCompletionQueue&) = delete;
  ~ThreadCompletionQueue() {
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

grpc::Status UnaryByteCall(grpc::ChannelInterface& channel, const grpc::internal::RpcMethod& method,
                           grpc::ClientContext& context, const grpc::ByteBuffer& request,
                           grpc::ByteBuffer& answer) {
  thread_local ThreadCompletionQueue thread_queue;
  grpc::CompletionQueue& queue = thread_queue.queue();
  // Lives in the call's arena; the pointer only runs its destructor.
  std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientAsyncResponseReaderHelper::Create<grpc::ByteBuffer>(
          &channel, &queue, method, &context, request));
  reader->StartCall();
  grpc::Status status;
  reader->Finish(&answer, &status, &status);
  // The finish is the only event a call queues, and only this thread waits
  // on its queue, so the first event is this call's. A queue never shuts
  // down while its thread is here.
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok) && tag != &status) {
  }
  return status;
}

}  // namespace tensord
