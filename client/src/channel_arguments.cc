#include "client/src/channel_arguments.h"

#include <grpc/grpc.h>

#include "service/wire/channel_arg_milliseconds.h"

namespace tensord {

grpc::ChannelArguments ClientChannelArguments(const ClientOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  arguments.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  if (options.own_connection) arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  arguments.SetInt(GRPC_ARG_ENABLE_RETRIES, options.grpc_retries ? 1 : 0);
  arguments.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS,
                   ChannelArgMilliseconds(options.connection_idle_timeout));
  if (options.keepalive_time != absl::InfiniteDuration()) {
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ChannelArgMilliseconds(options.keepalive_time));
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                     ChannelArgMilliseconds(options.keepalive_timeout));
    // Only while calls are in flight: an idle client sends nothing. gRPC's
    // limit of 2 pings without data sent stays: the first unanswered ping
    // is the one that finds a stopped server, and more pings than that
    // could earn strikes from the server's ping policy.
    arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  }
  return arguments;
}

}  // namespace tensord
