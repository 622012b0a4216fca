#include "service/wire/status_conversion.h"

#include <string>

#include "absl/strings/cord.h"

namespace tensord {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {
constexpr absl::string_view kUseRemotePayload = "type.tensord/use_remote";
}  // namespace

absl::Status MarkUseRemote(absl::Status status) {
  status.SetPayload(kUseRemotePayload, absl::Cord("1"));
  return status;
}

bool IsUseRemote(const absl::Status& status) {
  return status.GetPayload(kUseRemotePayload).has_value();
}

}  // namespace tensord
