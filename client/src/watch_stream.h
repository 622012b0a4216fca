// The client side of Watch: a gRPC callback reader that queues events for
// WatchStream::Next, joins a change split across messages, and stops
// reading when the caller falls behind (gRPC flow control then holds the
// server back).
#ifndef TENSORD_CLIENT_SRC_WATCH_STREAM_H_
#define TENSORD_CLIENT_SRC_WATCH_STREAM_H_

#include <memory>

#include <grpcpp/client_context.h>
#include <grpcpp/impl/codegen/channel_interface.h>
#include <grpcpp/impl/rpc_method.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/src/remote_connection.h"
#include "tensord/client.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord {

// Starts the call (`method`: TensorService/Watch, raw ByteBuffers, so each
// response is parsed and freed in the thread that handles it) with
// `context` (metadata set, no deadline) and waits up to `start_timeout` for
// the server's first message.
absl::StatusOr<std::unique_ptr<WatchStream>> StartWatchStream(
    grpc::ChannelInterface* channel, const grpc::internal::RpcMethod& method,
    std::unique_ptr<CallContext> context, const v1::WatchRequest& request,
    size_t max_buffered_events, absl::Duration start_timeout);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_WATCH_STREAM_H_
