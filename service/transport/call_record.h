// The bookkeeping every TensorService call does: a request id when it
// starts; at its end, its code and duration into ServiceMetrics and one
// `event=rpc` log line (debug level) carrying the request id.
#ifndef TENSORD_SERVICE_TRANSPORT_CALL_RECORD_H_
#define TENSORD_SERVICE_TRANSPORT_CALL_RECORD_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/metrics/service_metrics.h"

namespace grpc {
class CallbackServerContext;
}

namespace tensord {

// Not thread-safe: belongs to one call. Make it before the call's first
// write or Finish, so the request id goes out in the initial metadata.
class CallRecord {
 public:
  CallRecord(Rpc rpc, grpc::CallbackServerContext& context, ServiceMetrics& metrics);

  const std::string& request_id() const { return request_id_; }

  // Records the call's outcome once (later calls are ignored). Call it
  // while the context is alive: before Finish, or from the reactor's OnDone.
  void End(const absl::Status& status);

 private:
  const Rpc rpc_;
  grpc::CallbackServerContext& context_;
  ServiceMetrics& metrics_;
  const absl::Time start_;
  const std::string request_id_;
  bool ended_ = false;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_CALL_RECORD_H_
