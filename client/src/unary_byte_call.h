// One unary gRPC call whose answer is raw bytes (FetchInline, Stat), made
// through a completion queue its thread keeps for every such call. gRPC's
// BlockingUnaryCall creates, shuts down and destroys a queue per call:
// about 4,400 instructions, 6% of a 4 KiB fetch's client side (callgrind,
// scripts/count-small-call-instructions.sh).
#ifndef TENSORD_CLIENT_SRC_UNARY_BYTE_CALL_H_
#define TENSORD_CLIENT_SRC_UNARY_BYTE_CALL_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/async_unary_call.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include <memory>

namespace tensord {

namespace unary_byte_call_internal {
// The calling thread's queue, for UnaryByteCall only: shut down and drained
// as the thread ends, and made anew in a forked child (the parent's is not
// the child's to use).
grpc::CompletionQueue& ThreadCompletionQueue();
}  // namespace unary_byte_call_internal

// Blocks until the call ends, as BlockingUnaryCall does; `context`'s
// deadline and cancellation apply. `Request` is any type gRPC serializes
// (a ByteBuffer, or service/wire's NameVersionRequest). Safe from any
// thread: each has its own queue, which one call at a time takes (a call
// never runs inside another on one thread).
template <typename Request>
grpc::Status UnaryByteCall(grpc::ChannelInterface& channel, const grpc::internal::RpcMethod& method,
                           grpc::ClientContext& context, const Request& request,
                           grpc::ByteBuffer& answer) {
  grpc::CompletionQueue& queue = unary_byte_call_internal::ThreadCompletionQueue();
  // Lives in the call's arena; the pointer only runs its destructor.
  std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientAsyncResponseReaderHelper::Create<grpc::ByteBuffer>(
          &channel, &queue, method, &context, request));
  reader->StartCall();
  grpc::Status status;
  reader->Finish(&answer, &status, &status);
  // The finish is the only event a call queues, and gRPC queues it however
  // the call ends (deadline and cancellation too); only this thread waits
  // on its queue, so that event is the next.
  void* tag = nullptr;
  bool ok = false;
  if (!queue.Next(&tag, &ok) || tag != &status) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the thread's completion queue gave no answer for the call");
  }
  return status;
}

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_UNARY_BYTE_CALL_H_
