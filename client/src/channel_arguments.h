// The gRPC channel arguments a client's channels are made with, from its
// options (message sizes, its own connection, retries, idle close,
// keepalive). tensord-bench makes its "empty call as tensord's client makes
// it" on the same arguments.
#ifndef TENSORD_CLIENT_SRC_CHANNEL_ARGUMENTS_H_
#define TENSORD_CLIENT_SRC_CHANNEL_ARGUMENTS_H_

#include <grpcpp/support/channel_arguments.h>

#include "tensord/client.h"

namespace tensord {

// `options` must have passed the client's validation.
grpc::ChannelArguments ClientChannelArguments(const ClientOptions& options);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_CHANNEL_ARGUMENTS_H_
