// The bookkeeping every TensorService call does: a request id; at its end,
// its code and duration into ServiceMetrics and one `event=rpc` log line
// (debug level) carrying the request id.
#ifndef TENSORD_SERVICE_TRANSPORT_CALL_RECORD_H_
#define TENSORD_SERVICE_TRANSPORT_CALL_RECORD_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/metrics/service_metrics.h"

namespace grpc {
class CallbackServerContext;
class ServerUnaryReactor;
}  // namespace grpc

namespace tensord {

// Not thread-safe: belongs to one call. Make it before the call's first
// write or Finish, so the request id goes out in the initial metadata.
class CallRecord {
 public:
  // When an id the server makes up (the client sent none, or an unsafe
  // one) goes back to the client. A client's own id always goes back at
  // once.
  enum class IdEcho {
    // At the start: a stream's initial metadata may leave long before it
    // ends.
    kAtStart,
    // Only once something carries it: a log line, or a failure (End). A
    // unary call's initial metadata leaves with Finish, and an id no log
    // line names finds nothing: generating and sending one on every small
    // call cost 3,200 instructions per call (callgrind, client + server).
    kWhenUsed,
  };

  CallRecord(Rpc rpc, grpc::CallbackServerContext& context, ServiceMetrics& metrics,
             IdEcho echo = IdEcho::kWhenUsed);

  // The call's request id, made up (and sent back) on first use when the
  // client sent none. With kWhenUsed, use it before Finish.
  const std::string& request_id();

  // Records the call's outcome once (later calls are ignored). Call it
  // while the context is alive: before Finish, or from the reactor's OnDone.
  void End(const absl::Status& status);

 private:
  const Rpc rpc_;
  grpc::CallbackServerContext& context_;
  ServiceMetrics& metrics_;
  const absl::Time start_;
  std::string request_id_;  // empty until made up
  bool ended_ = false;
};

// Ends `call` with `status` and finishes the unary call with it, on the
// context's default reactor (what an answer known at once needs).
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status, CallRecord& call);

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_CALL_RECORD_H_
