#include "absl/strings/string_view.h"
#include "service/transport/tensor_service.h"

#include "absl/time/time.h"
#include "service/common/host_identity.h"
#include "service/common/log.h"
#include "service/transport/layout_conversion.h"
#include "service/transport/status_conversion.h"

namespace tensord {
namespace {

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status, absl::string_view rpc) {
  if (!status.ok()) {
    Log(LogLevel::kDebug, "rpc_failed",
        {{"rpc", rpc}, {"peer", context->peer()}, {"code", absl::StatusCodeToString(status.code())},
         {"message", status.message()}});
  }
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
  proto->set_retention(static_cast<v1::Retention>(info.retention));
}

grpc::ServerUnaryReactor* TensorService::Stat(grpc::CallbackServerContext* context,
                                              const v1::StatRequest* request,
                                              v1::StatResponse* response) {
  absl::StatusOr<VersionInfo> info = registry_.Stat(request->name(), request->version());
  if (info.ok()) InfoToProto(*info, response->mutable_info());
  return FinishUnary(context, info.status(), "Stat");
}

grpc::ServerUnaryReactor* TensorService::List(grpc::CallbackServerContext* context,
                                              const v1::ListRequest* request,
                                              v1::ListResponse* response) {
  absl::StatusOr<ListPage> page =
      registry_.List(request->prefix(), request->page_size(), request->page_token());
  if (page.ok()) {
    for (const VersionInfo& info : page->tensors) InfoToProto(info, response->add_tensors());
    response->set_next_page_token(page->next_page_token);
    response->set_total_bytes(registry_.host_bytes_used());
  }
  return FinishUnary(context, page.status(), "List");
}

grpc::ServerUnaryReactor* TensorService::Delete(grpc::CallbackServerContext* context,
                                                const v1::DeleteRequest* request,
                                                v1::DeleteResponse* response) {
  absl::StatusOr<uint64_t> removed = registry_.Delete(request->name(), request->version());
  if (removed.ok()) {
    response->set_version(*removed);
    Log(LogLevel::kInfo, "delete", {{"name", request->name()}, {"version", *removed}});
  }
  return FinishUnary(context, removed.status(), "Delete");
}

grpc::ServerUnaryReactor* TensorService::GetServerInfo(grpc::CallbackServerContext* context,
                                                       const v1::GetServerInfoRequest*,
                                                       v1::GetServerInfoResponse* response) {
  response->set_server_version(TENSORD_VERSION);
  response->set_boot_id(BootId());
  response->set_handoff_socket(options_.handoff.socket_path);
  response->set_host_bytes_used(registry_.host_bytes_used());
  response->set_host_bytes_limit(registry_.host_bytes_limit());
  response->set_tensor_count(registry_.tensor_count());
  return FinishUnary(context, absl::OkStatus(), "GetServerInfo");
}

grpc::ServerUnaryReactor* TensorService::IssueHandoffToken(
    grpc::CallbackServerContext* context, const v1::IssueHandoffTokenRequest*,
    v1::IssueHandoffTokenResponse* response) {
  absl::Status status;
  if (options_.handoff.socket_path.empty()) {
    status = absl::FailedPreconditionError("local handoff is off on this server (--handoff-socket)");
  } else if (absl::StatusOr<HandoffTokens::Issued> issued = tokens_.Issue(); issued.ok()) {
    response->set_token(issued->token);
    response->set_expires_unix_nanos(absl::ToUnixNanos(issued->expires));
  } else {
    status = issued.status();
  }
  return FinishUnary(context, status, "IssueHandoffToken");
}

grpc::ServerUnaryReactor* TensorService::Snapshot(grpc::CallbackServerContext* context,
                                                  const v1::SnapshotRequest*,
                                                  v1::SnapshotResponse* response) {
  if (snapshots_ == nullptr) {
    return FinishUnary(context,
                       absl::FailedPreconditionError(
                           "snapshots are off on this server: start it with --snapshot-dir"),
                       "Snapshot");
  }
  absl::StatusOr<SnapshotSummary> written = snapshots_->Write(registry_);
  if (written.ok()) {
    response->set_path(written->path);
    response->set_tensor_count(written->tensor_count);
    response->set_total_bytes(written->total_bytes);
  } else {
    Log(LogLevel::kError, "snapshot_failed", {{"error", written.status().ToString()}});
  }
  return FinishUnary(context, written.status(), "Snapshot");
}

}  // namespace tensord
