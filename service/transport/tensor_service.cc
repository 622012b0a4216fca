#include "service/transport/tensor_service.h"
#include "absl/strings/string_view.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "service/common/build_info.h"
#include "service/common/host_identity.h"
#include "service/common/log.h"
#include "service/common/tensor_name.h"
#include "service/transport/call_record.h"
#include "service/transport/latest_read.h"
#include "service/transport/tensor_info_wire.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/status_conversion.h"
#include "service/wire/wire_requests.h"

namespace tensord {
TensorService::TensorService(Registry& registry, HandoffTokens& tokens,
                             const ServerOptions& options, ServiceMetrics& metrics,
                             SnapshotStore* snapshots)
    : registry_(registry),
      tokens_(tokens),
      options_(options),
      metrics_(metrics),
      snapshots_(snapshots),
      authenticator_(options.token_grants.empty()
                         ? nullptr
                         : std::make_unique<TokenAuthenticator>(options.token_grants)),
      streams_(options.stream_limits),
      parted_puts_(registry, options.cluster_access.get()),
      watches_(options.max_watches) {
  SetMessageAllocatorFor_List(&list_messages_);
  SetMessageAllocatorFor_Delete(&delete_messages_);
}

void TensorService::EndWatches() {
  watches_.EndAll(absl::UnavailableError(
      "the server is shutting down; watch again elsewhere or after it restarts"));
}

absl::StatusOr<const TokenGrant*> TensorService::AdmitCall(grpc::CallbackServerContext* context,
                                                           absl::string_view rpc,
                                                           absl::string_view name) const {
  if (authenticator_ == nullptr) return nullptr;
  std::optional<absl::string_view> authorization;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  absl::StatusOr<const TokenGrant*> grant = authenticator_->Admit(authorization, rpc, name);
  if (!grant.ok()) {
    Log(LogLevel::kInfo, "rpc_refused",
        {{"rpc", rpc},
         {"peer", context->peer()},
         {"code", absl::StatusCodeToString(grant.status().code())}});
  }
  return grant;
}

absl::Status TensorService::CheckName(const TokenGrant* grant, absl::string_view rpc,
                                      absl::string_view name) {
  if (grant == nullptr) return absl::OkStatus();
  return TokenAuthenticator::CheckName(*grant, rpc, name);
}

namespace {

// The fields VersionInfo and TensorVersion share.
template <typename Source>
void WriteInfo(const Source& source, uint64_t open_leases, v1::TensorInfo* proto) {
  proto->set_name(source.name);
  proto->set_version(source.version);
  LayoutToProto(source.layout, proto->mutable_layout());
  proto->set_total_bytes(source.total_bytes);
  proto->set_crc32c(source.crc32c);
  proto->set_created_unix_nanos(absl::ToUnixNanos(source.created));
  proto->set_open_leases(open_leases);
  proto->set_retention(static_cast<v1::Retention>(source.retention));
}

}  // namespace

void InfoToProto(const VersionInfo& info, v1::TensorInfo* proto) {
  WriteInfo(info, info.open_leases, proto);
  if (!info.node.empty()) proto->set_node(info.node);
}

void InfoToProto(const TensorVersion& version, v1::TensorInfo* proto) {
  WriteInfo(version, version.open_leases.load(std::memory_order_relaxed), proto);
}

grpc::ServerUnaryReactor* TensorService::Stat(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request_bytes,
                                              grpc::ByteBuffer* response) {
  CallRecord call(Rpc::kStat, *context, metrics_);
  // Parsed before the token is checked only to name the tensor in a
  // refusal; an unauthenticated caller still hears UNAUTHENTICATED first.
  grpc::Slice bytes;  // request.name views it
  WireStatRequest request;
  absl::Status parsed = FlattenByteBuffer(*request_bytes, bytes, "stat request");
  if (parsed.ok() && !ParseWireStatRequest({bytes.begin(), bytes.size()}, request)) {
    parsed = absl::InvalidArgumentError("stat request is not a valid tensord.v1.StatRequest");
  }
  absl::StatusOr<const TokenGrant*> grant =
      AdmitCall(context, "Stat", parsed.ok() ? request.name : "");
  if (!grant.ok()) return FinishUnary(context, grant.status(), call);
  if (!parsed.ok()) return FinishUnary(context, parsed, call);
  if (absl::Status allowed = CheckName(*grant, "Stat", request.name); !allowed.ok()) {
    return FinishUnary(context, allowed, call);
  }
  if (options_.cluster_access != nullptr && request.version == 0) {
    return StatLatestInCluster(context, std::string(request.name), response, call);
  }
  absl::StatusOr<std::shared_ptr<const TensorVersion>> found =
      registry_.Find(request.name, request.version);
  if (found.ok()) {
    grpc::ByteBuffer encoded = EncodeStatResponse(**found);
    response->Swap(&encoded);
  }
  return FinishUnary(context, found.status(), call);
}

grpc::ServerUnaryReactor* TensorService::StatLatestInCluster(grpc::CallbackServerContext* context,
                                                             std::string name,
                                                             grpc::ByteBuffer* response,
                                                             CallRecord& call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto record = std::make_shared<CallRecord>(std::move(call));
  LeaseForRead(registry_, options_.cluster_access.get(), name, 0,
               [response, reactor, record](absl::StatusOr<Lease> lease) {
                 if (lease.ok()) {
                   grpc::ByteBuffer encoded = EncodeStatResponse(**lease);
                   response->Swap(&encoded);
                 }
                 record->End(lease.status());
                 reactor->Finish(ToGrpcStatus(lease.status()));
               });
  return reactor;
}

grpc::ServerUnaryReactor* TensorService::List(grpc::CallbackServerContext* context,
                                              const v1::ListRequest* request,
                                              v1::ListResponse* response) {
  CallRecord call(Rpc::kList, *context, metrics_);
  absl::StatusOr<const TokenGrant*> grant = AdmitCall(context, "List", request->prefix());
  if (!grant.ok()) return FinishUnary(context, grant.status(), call);
  // A token limited to a namespace lists only inside it.
  absl::StatusOr<std::string> prefix =
      *grant == nullptr ? request->prefix()
                        : TokenAuthenticator::ListPrefix(**grant, request->prefix());
  if (!prefix.ok()) return FinishUnary(context, prefix.status(), call);
  if (request->cluster()) return ListCluster(context, *prefix, *request, response, call);
  absl::StatusOr<ListPage> page =
      registry_.List(*prefix, request->page_size(), request->page_token());
  if (page.ok()) {
    for (const VersionInfo& info : page->tensors) InfoToProto(info, response->add_tensors());
    response->set_next_page_token(page->next_page_token);
    response->set_total_bytes(registry_.host_bytes_used());
  }
  return FinishUnary(context, page.status(), call);
}

grpc::ServerUnaryReactor* TensorService::ListCluster(grpc::CallbackServerContext* context,
                                                     const std::string& prefix,
                                                     const v1::ListRequest& request,
                                                     v1::ListResponse* response, CallRecord& call) {
  constexpr uint32_t kMaxPageSize = 1000;
  if (options_.cluster_access == nullptr) {
    return FinishUnary(context,
                       absl::FailedPreconditionError(
                           "List with cluster=true needs a cluster; this server is a single node "
                           "(start it with --etcd-endpoints)"),
                       call);
  }
  if (request.page_size() > kMaxPageSize) {
    return FinishUnary(context,
                       absl::InvalidArgumentError(absl::StrCat("page_size ", request.page_size(),
                                                               " is above ", kMaxPageSize)),
                       call);
  }
  // The page token of a cluster listing is the last name of the page.
  if (!request.page_token().empty()) {
    if (absl::Status valid = ValidateTensorName(request.page_token()); !valid.ok()) {
      return FinishUnary(context,
                         absl::InvalidArgumentError(absl::StrCat(
                             "page_token '", request.page_token(),
                             "' is not one a cluster listing gave: ", valid.message())),
                         call);
    }
  }
  const uint32_t page_size = request.page_size() == 0 ? 100 : request.page_size();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto record = std::make_shared<CallRecord>(std::move(call));
  options_.cluster_access->ListNames(prefix, request.page_token(), page_size + 1,
                                     [this, response, reactor, record, page_size](
                                         absl::StatusOr<std::vector<ClusterVersion>> names) {
                                       if (names.ok()) {
                                         const bool more = names->size() > page_size;
                                         if (more) names->resize(page_size);
                                         for (const ClusterVersion& version : *names) {
                                           v1::TensorInfo* info = response->add_tensors();
                                           info->set_name(version.name);
                                           // Across nodes a version is known by its cluster order.
                                           info->set_version(static_cast<uint64_t>(version.origin));
                                           info->set_total_bytes(version.total_bytes);
                                           info->set_crc32c(version.crc32c);
                                           info->set_node(version.writer);
                                         }
                                         if (more)
                                           response->set_next_page_token(names->back().name);
                                         response->set_total_bytes(registry_.host_bytes_used());
                                       }
                                       record->End(names.status());
                                       reactor->Finish(ToGrpcStatus(names.status()));
                                     });
  return reactor;
}

grpc::ServerUnaryReactor* TensorService::Delete(grpc::CallbackServerContext* context,
                                                const v1::DeleteRequest* request,
                                                v1::DeleteResponse* response) {
  CallRecord call(Rpc::kDelete, *context, metrics_);
  absl::StatusOr<const TokenGrant*> grant = AdmitCall(context, "Delete", request->name());
  if (!grant.ok()) return FinishUnary(context, grant.status(), call);
  if (absl::Status allowed = CheckName(*grant, "Delete", request->name()); !allowed.ok()) {
    return FinishUnary(context, allowed, call);
  }
  ClusterAccess* cluster = options_.cluster_access.get();
  if (cluster == nullptr) {
    absl::StatusOr<uint64_t> removed = registry_.Delete(request->name(), request->version());
    if (removed.ok()) {
      response->set_version(*removed);
      Log(LogLevel::kInfo, "delete",
          {{"name", request->name()}, {"version", *removed}, {"request_id", call.request_id()}});
    }
    return FinishUnary(context, removed.status(), call);
  }
  if (request->version() != 0) {
    // Version numbers are each node's own; the cluster deletes a name.
    return FinishUnary(context,
                       absl::InvalidArgumentError(absl::StrCat(
                           "a delete of '", request->name(), "' at version ", request->version(),
                           ": in a cluster a delete removes the name everywhere; give no version")),
                       call);
  }
  if (absl::Status valid = ValidateTensorName(request->name()); !valid.ok()) {
    return FinishUnary(context, valid, call);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto record = std::make_shared<CallRecord>(std::move(call));
  cluster->Delete(request->name(), [reactor, record, name = request->name()](absl::Status deleted) {
    if (deleted.ok()) {
      Log(LogLevel::kInfo, "delete",
          {{"name", name}, {"cluster", true}, {"request_id", record->request_id()}});
    }
    record->End(deleted);
    reactor->Finish(ToGrpcStatus(deleted));
  });
  return reactor;
}

grpc::ServerUnaryReactor* TensorService::GetServerInfo(grpc::CallbackServerContext* context,
                                                       const v1::GetServerInfoRequest*,
                                                       v1::GetServerInfoResponse* response) {
  CallRecord call(Rpc::kGetServerInfo, *context, metrics_);
  if (absl::StatusOr<const TokenGrant*> grant = AdmitCall(context, "GetServerInfo"); !grant.ok()) {
    return FinishUnary(context, grant.status(), call);
  }
  response->set_server_version(std::string(ReleaseVersion()));
  response->set_boot_id(BootId());
  response->set_handoff_socket(options_.handoff.socket_path);
  response->set_host_bytes_used(registry_.host_bytes_used());
  response->set_host_bytes_limit(registry_.host_bytes_limit());
  response->set_tensor_count(registry_.tensor_count());
  if (const DeviceBackend* backend = registry_.device_backend(); backend != nullptr) {
    response->set_device_backend(std::string(backend->name()));
  }
  for (int device = 0; device < registry_.device_count(); ++device) {
    v1::DeviceMemoryUsage* usage = response->add_devices();
    usage->mutable_device()->set_type(kDLCUDA);
    usage->mutable_device()->set_id(device);
    usage->set_bytes_used(registry_.device_bytes_used(device));
    usage->set_bytes_limit(registry_.device_bytes_limit(device));
  }
  if (options_.cluster != nullptr) {
    response->set_node_name(options_.cluster->node_name());
    for (const ClusterMember& member : options_.cluster->members()) {
      v1::ClusterMember* out = response->add_cluster_members();
      out->set_node_name(member.node_name);
      out->set_advertise_address(member.advertise_address);
      out->set_handoff_available(member.handoff_available);
      out->set_host_bytes_used(member.host_bytes_used);
      out->set_host_bytes_limit(member.host_bytes_limit);
      out->set_server_version(member.server_version);
      out->set_start_time_unix_ms(member.start_time_unix_ms);
    }
  }
  return FinishUnary(context, absl::OkStatus(), call);
}

// The handoff connection a token's redeemer gets may do what the caller
// may: the same permissions, within the same prefix. The arenas it is handed
// hold only names of that prefix (security/reader_domains.h), so a prefix-bound
// reader maps no byte of another namespace.
HandoffScope TensorService::HandoffScopeOf(const TokenGrant* grant) {
  if (grant == nullptr) return HandoffScope{};  // authentication is off
  const bool admin = (grant->permissions & kPermissionAdmin) != 0;
  return HandoffScope{.read = admin || (grant->permissions & kPermissionRead) != 0,
                      .write = admin || (grant->permissions & kPermissionWrite) != 0,
                      .name_prefix = grant->name_prefix};
}

grpc::ServerUnaryReactor* TensorService::IssueHandoffToken(
    grpc::CallbackServerContext* context, const v1::IssueHandoffTokenRequest*,
    v1::IssueHandoffTokenResponse* response) {
  CallRecord call(Rpc::kIssueHandoffToken, *context, metrics_);
  absl::Status status;
  if (absl::StatusOr<const TokenGrant*> grant = AdmitCall(context, "IssueHandoffToken");
      !grant.ok()) {
    status = grant.status();
  } else if (options_.handoff.socket_path.empty()) {
    status =
        absl::FailedPreconditionError("local handoff is off on this server (--handoff-socket)");
  } else if (const HandoffScope scope = HandoffScopeOf(*grant); !scope.read && !scope.write) {
    status = absl::PermissionDeniedError(
        "IssueHandoffToken needs a token with read or write permission");
  } else if (absl::StatusOr<HandoffTokens::Issued> issued = tokens_.Issue(scope); issued.ok()) {
    response->set_token(issued->token);
    response->set_expires_unix_nanos(absl::ToUnixNanos(issued->expires));
  } else {
    status = issued.status();
  }
  return FinishUnary(context, status, call);
}

grpc::ServerUnaryReactor* TensorService::Snapshot(grpc::CallbackServerContext* context,
                                                  const v1::SnapshotRequest*,
                                                  v1::SnapshotResponse* response) {
  CallRecord call(Rpc::kSnapshot, *context, metrics_);
  // Not in the permission table: needs admin.
  if (absl::StatusOr<const TokenGrant*> grant = AdmitCall(context, "Snapshot"); !grant.ok()) {
    return FinishUnary(context, grant.status(), call);
  }
  if (snapshots_ == nullptr) {
    return FinishUnary(context,
                       absl::FailedPreconditionError(
                           "snapshots are off on this server: start it with --snapshot-dir"),
                       call);
  }
  // Writing every durable byte can take seconds: not on a callback thread.
  // One snapshot runs and one waits at most; a caller that has gone by the
  // time its turn comes gets nothing written.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::shared_ptr<CallRecord> record = std::make_shared<CallRecord>(std::move(call));
  absl::Status started = snapshot_threads_.Run([this, context, reactor, response, record] {
    if (context->IsCancelled()) {
      const absl::Status gone =
          absl::CancelledError("the caller went away before the snapshot began");
      record->End(gone);
      reactor->Finish(ToGrpcStatus(gone));
      return;
    }
    CallRecord& call = *record;
    absl::StatusOr<SnapshotSummary> written = snapshots_->Write(registry_);
    if (written.ok()) {
      response->set_path(written->path);
      response->set_tensor_count(written->tensor_count);
      response->set_total_bytes(written->total_bytes);
    } else {
      Log(LogLevel::kError, "snapshot_failed",
          {{"error", written.status().ToString()}, {"request_id", call.request_id()}});
    }
    call.End(written.status());
    reactor->Finish(ToGrpcStatus(written.status()));
  });
  if (!started.ok()) {
    const absl::Status refused = absl::ResourceExhaustedError(
        absl::StrCat("a snapshot is already being written and another waits; retry later (",
                     started.message(), ")"));
    record->End(refused);
    reactor->Finish(ToGrpcStatus(refused));
  }
  return reactor;
}

}  // namespace tensord
