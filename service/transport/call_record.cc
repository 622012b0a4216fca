#include "service/transport/call_record.h"

#include <grpcpp/server_context.h>

#include "absl/time/clock.h"
#include "service/common/episode_log.h"
#include "service/common/errno_status.h"
#include "service/common/log.h"
#include "service/wire/request_id.h"
#include "service/wire/status_conversion.h"

namespace tensord {

CallRecord::CallRecord(Rpc rpc, grpc::CallbackServerContext& context, ServiceMetrics& metrics,
                       IdEcho echo)
    : rpc_(rpc),
      context_(context),
      metrics_(metrics),
      start_(absl::Now()),
      request_id_(OfferedRequestId(context)) {
  if (!request_id_.empty()) {
    EchoRequestId(context_, request_id_);
  } else if (echo == IdEcho::kAtStart) {
    request_id();
  }
}

const std::string& CallRecord::request_id() {
  if (request_id_.empty()) {
    request_id_ = GenerateRequestId();
    EchoRequestId(context_, request_id_);
  }
  return request_id_;
}

void CallRecord::End(const absl::Status& status) {
  if (ended_) return;
  ended_ = true;
  // A failure's id goes back so the caller can quote it; the debug line
  // below carries it too.
  if (!status.ok() || LogEnabled(LogLevel::kDebug)) request_id();
  const absl::Time now = absl::Now();
  const absl::Duration latency = now - start_;
  metrics_.RecordCall(rpc_, status.code(), latency);
  if (IsFdExhaustion(status)) FdExhaustionLog().Note(RpcName(rpc_), status.message(), now);
  if (!LogEnabled(LogLevel::kDebug)) return;
  if (status.ok()) {
    Log(LogLevel::kDebug, "rpc",
        {{"rpc", RpcName(rpc_)},
         {"request_id", request_id_},
         {"peer", context_.peer()},
         {"code", "OK"},
         {"duration_us", absl::ToInt64Microseconds(latency)}});
  } else {
    Log(LogLevel::kDebug, "rpc",
        {{"rpc", RpcName(rpc_)},
         {"request_id", request_id_},
         {"peer", context_.peer()},
         {"code", absl::StatusCodeToString(status.code())},
         {"duration_us", absl::ToInt64Microseconds(latency)},
         {"message", status.message()}});
  }
}

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status, CallRecord& call) {
  call.End(status);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace tensord
