// One unary gRPC call whose request and answer are raw bytes (FetchInline,
// Stat), made through a completion queue its thread keeps for every such
// call. gRPC's BlockingUnaryCall creates, shuts down and destroys a queue
// per call: about 4,200 instructions, 5% of a 4 KiB fetch's client side
// (callgrind, scripts/count-small-call-instructions.sh).
#ifndef TENSORD_CLIENT_SRC_UNARY_BYTE_CALL_H_
#define TENSORD_CLIENT_SRC_UNARY_BYTE_CALL_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

namespace tensord {

// Blocks until the call ends, as BlockingUnaryCall does; `context`'s
// deadline and cancellation apply. Safe from any thread: each thread has
// its own queue, and a call on it takes the queue only until it returns.
grpc::Status UnaryByteCall(grpc::ChannelInterface& channel, const grpc::internal::RpcMethod& method,
                           grpc::ClientContext& context, const grpc::ByteBuffer& request,
                           grpc::ByteBuffer& answer);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_UNARY_BYTE_CALL_H_
