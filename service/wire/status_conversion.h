// The one place where absl::Status and grpc::Status meet. Their codes are the
// same canonical codes, so conversion keeps code and message.
#ifndef TENSORD_SERVICE_WIRE_STATUS_CONVERSION_H_
#define TENSORD_SERVICE_WIRE_STATUS_CONVERSION_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tensord {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// A local-handoff refusal the gRPC path can serve instead (HandoffResponse
// use_remote), marked with a status payload so TransferPath::kAuto falls back.
absl::Status MarkUseRemote(absl::Status status);
bool IsUseRemote(const absl::Status& status);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_STATUS_CONVERSION_H_
