#include "absl/strings/string_view.h"
#include "service/transport/tensor_service.h"

#include "absl/time/time.h"
#include "service/common/host_identity.h"
#include "service/common/log.h"
#include "service/transport/call_record.h"
#include "service/transport/layout_conversion.h"
#include "service/transport/status_conversion.h"

namespace tensord {
namespace {

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status, CallRecord& call) {
  call.End(status);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

void InfoToProto(const VersionInfo& info, v1::TensorInfo* proto) {
  proto->set_name(info.name);
  proto->set_version(info.version);
  LayoutToProto(info.layout, proto->mutable_layout());
  proto->set_total_bytes(info.total_bytes);
  proto->set_crc32c(info.crc32c);
  proto->set_created_unix_nanos(absl::ToUnixNanos(info.created));
  proto->set_open_leases(info.open_leases);
}

grpc::ServerUnaryReactor* TensorService::Stat(grpc::CallbackServerContext* context,
                                              const v1::StatRequest* request,
                                              v1::StatResponse* response) {
  CallRecord call(Rpc::kStat, *context, metrics_);
  absl::StatusOr<VersionInfo> info = registry_.Stat(request->name(), request->version());
  if (info.ok()) InfoToProto(*info, response->mutable_info());
  return FinishUnary(context, info.status(), call);
}

grpc::ServerUnaryReactor* TensorService::List(grpc::CallbackServerContext* context,
                                              const v1::ListRequest* request,
                                              v1::ListResponse* response) {
  CallRecord call(Rpc::kList, *context, metrics_);
  absl::StatusOr<ListPage> page =
      registry_.List(request->prefix(), request->page_size(), request->page_token());
  if (page.ok()) {
    for (const VersionInfo& info : page->tensors) InfoToProto(info, response->add_tensors());
    response->set_next_page_token(page->next_page_token);
    response->set_total_bytes(registry_.host_bytes_used());
  }
  return FinishUnary(context, page.status(), call);
}

grpc::ServerUnaryReactor* TensorService::Delete(grpc::CallbackServerContext* context,
                                                const v1::DeleteRequest* request,
                                                v1::DeleteResponse* response) {
  CallRecord call(Rpc::kDelete, *context, metrics_);
  absl::StatusOr<uint64_t> removed = registry_.Delete(request->name(), request->version());
  if (removed.ok()) {
    response->set_version(*removed);
    Log(LogLevel::kInfo, "delete",
        {{"name", request->name()}, {"version", *removed}, {"request_id", call.request_id()}});
  }
  return FinishUnary(context, removed.status(), call);
}

grpc::ServerUnaryReactor* TensorService::GetServerInfo(grpc::CallbackServerContext* context,
                                                       const v1::GetServerInfoRequest*,
                                                       v1::GetServerInfoResponse* response) {
  CallRecord call(Rpc::kGetServerInfo, *context, metrics_);
  response->set_server_version(TENSORD_VERSION);
  response->set_boot_id(BootId());
  response->set_handoff_socket(options_.handoff.socket_path);
  response->set_host_bytes_used(registry_.host_bytes_used());
  response->set_host_bytes_limit(registry_.host_bytes_limit());
  response->set_tensor_count(registry_.tensor_count());
  return FinishUnary(context, absl::OkStatus(), call);
}

grpc::ServerUnaryReactor* TensorService::IssueHandoffToken(
    grpc::CallbackServerContext* context, const v1::IssueHandoffTokenRequest*,
    v1::IssueHandoffTokenResponse* response) {
  CallRecord call(Rpc::kIssueHandoffToken, *context, metrics_);
  absl::Status status;
  if (options_.handoff.socket_path.empty()) {
    status = absl::FailedPreconditionError("local handoff is off on this server (--handoff-socket)");
  } else if (absl::StatusOr<HandoffTokens::Issued> issued = tokens_.Issue(); issued.ok()) {
    response->set_token(issued->token);
    response->set_expires_unix_nanos(absl::ToUnixNanos(issued->expires));
  } else {
    status = issued.status();
  }
  return FinishUnary(context, status, call);
}

}  // namespace tensord
