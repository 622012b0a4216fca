#include "service/transport/handoff_session.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "service/common/log.h"
#include "service/common/episode_log.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"
#include "service/wire/handoff_device_handle.h"
#include "service/transport/request_validation.h"
#include "service/wire/status_conversion.h"
#include "service/transport/tensor_service.h"

namespace tensord {

HandoffSession::Reply HandoffSession::Handle(absl::string_view packet, absl::Time now) {
  // The previous reply has been sent: its exported fds are no longer needed
  // (the keepalive, kept with the lease or create, holds the memory).
  sent_export_fds_.clear();
  v1::HandoffRequest request;
  v1::HandoffResponse response;
  Reply reply;
  absl::Status status;
  if (!request.ParseFromArray(packet.data(), static_cast<int>(packet.size()))) {
    status = absl::InvalidArgumentError(
        absl::StrCat("handoff packet of ", packet.size(), " bytes is not a HandoffRequest"));
  } else {
    response.set_request_id(request.request_id());
    status = Dispatch(request, now, response, reply.fds);
  }
  if (!status.ok()) {
    if (IsFdExhaustion(status)) FdExhaustionLog().Note("handoff request", status.message(), now);
    response.clear_kind();
    reply.fds.clear();
    response.set_code(static_cast<int32_t>(status.code()));
    response.set_message(std::string(status.message()));
    response.set_use_remote(IsUseRemote(status));
  }
  reply.bytes = response.SerializeAsString();
  return reply;
}

int HandoffSession::KeepUntilSent(ScopedFd fd) {
  sent_export_fds_.push_back(std::move(fd));
  return sent_export_fds_.back().get();
}

absl::Status HandoffSession::Dispatch(const v1::HandoffRequest& request, absl::Time now,
                                      v1::HandoffResponse& response, std::vector<int>& fds) {
  if (request.kind_case() == v1::HandoffRequest::kAuthenticate) {
    return Authenticate(request.authenticate());
  }
  if (!authorized_) {
    return absl::PermissionDeniedError(absl::StrCat(
        "peer uid ", peer_.uid, " gid ", peer_.gid, " (pid ", peer_.pid,
        ") is not on the handoff allow-list (--handoff-allow-uid/--handoff-allow-gid); "
        "authenticate with a token from IssueHandoffToken"));
  }
  // Any other request ends an unfinished batch answer.
  if (request.kind_case() != v1::HandoffRequest::kAcquireMore) DropPendingPackets();
  int fd = -1;
  absl::Status status;
  switch (request.kind_case()) {
    case v1::HandoffRequest::kAcquire:
      status = Acquire(request.acquire(), *response.mutable_acquire(), fd);
      break;
    case v1::HandoffRequest::kCreate:
      status = Create(request.create(), now, *response.mutable_create(), fd);
      break;
    case v1::HandoffRequest::kAcquireMany:
      return AcquireMany(request.acquire_many(), *response.mutable_acquire_many(), fds);
    case v1::HandoffRequest::kAcquireMore:
      return AcquireMore(*response.mutable_acquire_many(), fds);
    default:
      return DispatchWithoutFd(request, response);
  }
  if (fd >= 0) fds.push_back(fd);
  return status;
}

absl::Status HandoffSession::DispatchWithoutFd(const v1::HandoffRequest& request,
                                               v1::HandoffResponse& response) {
  switch (request.kind_case()) {
    case v1::HandoffRequest::kRelease: return Release(request.release());
    case v1::HandoffRequest::kSeal: return Seal(request.seal(), *response.mutable_seal());
    case v1::HandoffRequest::kAbort: return Abort(request.abort());
    case v1::HandoffRequest::kSealGroup:
      return SealGroup(request.seal_group(), *response.mutable_seal_group());
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("handoff request kind ", static_cast<int>(request.kind_case()), " is unknown"));
  }
}

absl::Status HandoffSession::Authenticate(const v1::AuthenticateRequest& request) {
  if (authorized_) return absl::OkStatus();
  std::optional<HandoffScope> scope = tokens_.Redeem(request.token());
  if (!scope.has_value()) {
    return absl::PermissionDeniedError(
        "handoff token is unknown, expired or already used; get a new one from IssueHandoffToken");
  }
  authorized_ = true;
  scope_ = *std::move(scope);
  return absl::OkStatus();
}

absl::Status HandoffSession::ClusterRedirect(absl::string_view name, uint64_t version,
                                             const absl::Status& local) const {
  // Versions are numbered per node: only a read of the latest can be
  // answered by another node's copy. The event loop must not wait for a
  // pull, so the client is sent to gRPC, whose fetch pulls the version here
  // once; later handoff reads of it are local.
  if (cluster_reads_ == nullptr || version != 0) return absl::OkStatus();
  if (local.ok()) {
    if (cluster_reads_->HoldsLatest(name)) return absl::OkStatus();
    return MarkUseRemote(absl::NotFoundError(absl::StrCat(
        "another node holds a newer version of '", name,
        "': fetch it over gRPC, which copies it to this node")));
  }
  if (local.code() != absl::StatusCode::kNotFound) return absl::OkStatus();
  return MarkUseRemote(absl::NotFoundError(absl::StrCat(
      "'", name, "' is not on this node; a gRPC fetch looks for it on the other nodes: ",
      local.message())));
}

absl::Status HandoffSession::Acquire(const v1::AcquireRequest& request,
                                     v1::AcquireResponse& response, int& fd) {
  TENSORD_RETURN_IF_ERROR(scope_.Check(request.name(), /*write_access=*/false));
  TENSORD_RETURN_IF_ERROR(ClusterRedirect(request.name(), request.version(), absl::OkStatus()));
  absl::StatusOr<Lease> acquired = registry_.Acquire(request.name(), request.version());
  if (!acquired.ok()) {
    TENSORD_RETURN_IF_ERROR(ClusterRedirect(request.name(), request.version(), acquired.status()));
    return acquired.status();
  }
  Lease lease = *std::move(acquired);
  const bool on_device = IsDeviceLayout(lease->layout);
  if (on_device && request.host_only()) {
    return MarkUseRemote(absl::FailedPreconditionError(absl::StrCat(
        "tensor '", lease->name, "' version ", lease->version, " is in ",
        DeviceLabel(lease->layout.device),
        " memory and the request asked for host bytes (host_only): the gRPC path copies it to "
        "the host, use TransferPath::kRemote or kAuto")));
  }
  const HostBytes* host_bytes = on_device ? nullptr : lease->buffer.get();
  if (host_bytes != nullptr && host_bytes->arena_id() != 0 && !request.accepts_arena_slots()) {
    return MarkUseRemote(absl::FailedPreconditionError(absl::StrCat(
        "tensor '", lease->name, "' version ", lease->version,
        " is held in a shared arena and this client cannot map one "
        "(AcquireRequest.accepts_arena_slots is unset): fetch it over gRPC")));
  }
  InfoToProto(*lease, response.mutable_info());
  const auto& held = request.held_versions();
  if (std::find(held.begin(), held.end(), lease->version) != held.end()) {
    return absl::OkStatus();  // the client's cached lease already covers it
  }
  if (leases_.size() >= limits_.max_leases_per_connection) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "connection holds ", leases_.size(), " leases; the limit (--max-leases-per-client) is ",
        limits_.max_leases_per_connection));
  }
  HeldLease held_lease;
  if (on_device) {
    // A 0-byte device version has no allocation: the lease alone describes it.
    if (lease->device_memory != nullptr) {
      TENSORD_ASSIGN_OR_RETURN(held_lease.device_export,
                               ExportDevice(*lease->device_memory,
                                            response.mutable_device_handle()));
      fd = KeepUntilSent(std::move(held_lease.device_export.fd));
    }
  } else {
    // A shared arena holds only versions of this name's access domain
    // (RegistryOptions::arena_domain), all readable by this connection.
    fd = host_bytes->fd();
    response.set_mapping_bytes(host_bytes->mapping_size());
    response.set_mapping_offset(host_bytes->mapping_offset());
    response.set_arena_id(host_bytes->arena_id());
  }
  uint64_t id = next_id_++;
  response.set_lease_id(id);
  metrics_.AddHandoffBytesSent(lease->total_bytes);
  held_lease.lease = std::move(lease);
  leases_.emplace(id, std::move(held_lease));
  return absl::OkStatus();
}

absl::StatusOr<ExportedHandle> HandoffSession::ExportDevice(const DeviceAllocation& allocation,
                                                            v1::DeviceHandle* proto) {
  DeviceBackend* backend = registry_.device_backend();
  if (backend == nullptr) {
    return absl::InternalError("a device allocation exists but the registry has no backend");
  }
  TENSORD_ASSIGN_OR_RETURN(ExportedHandle handle,
                           backend->Export(allocation, allocation.exportable_as()));
  DeviceHandleToProto(handle, backend->name(), proto);
  return handle;
}

absl::Status HandoffSession::Release(const v1::ReleaseRequest& request) {
  if (leases_.erase(request.lease_id()) == 0) {
    return absl::NotFoundError(
        absl::StrCat("lease ", request.lease_id(), " is not held by this connection"));
  }
  return absl::OkStatus();
}

absl::Status HandoffSession::Create(const v1::CreateRequest& request, absl::Time now,
                                    v1::CreateResponse& response, int& fd) {
  v1::PutHeader header;
  header.set_name(request.name());
  *header.mutable_layout() = request.layout();
  header.set_total_bytes(request.total_bytes());
  header.set_retention(request.retention());
  TENSORD_ASSIGN_OR_RETURN(ValidatedPut put, ValidatePutHeader(header, limits_.max_tensor_bytes));
  TENSORD_RETURN_IF_ERROR(scope_.Check(put.name, /*write_access=*/true));
  // The copies are checked before anything is allocated, as a Put's header
  // is. ReplicasFor answers from memory, except that it rereads the member
  // list from etcd when the kept one has fewer live nodes than asked for
  // (a node that just joined): rare, and bounded by the etcd call's
  // deadline, but it does hold this event loop for that read.
  uint32_t replicas = 0;  // single node: nothing for the producer to await
  if (cluster_reads_ != nullptr) {
    TENSORD_ASSIGN_OR_RETURN(replicas, cluster_reads_->ReplicasFor(put.name, request.replicas()));
  } else if (request.replicas() > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "create of '", put.name, "' asks for replicas=", request.replicas(),
        ", but this server is a single node (start it with --etcd-endpoints to form a cluster)"));
  }
  // A device layout reserves against its device's budget and allocates on
  // the device backend (Registry::Prepare); the producer imports it.
  PendingCreate create;
  // Its own memfd: the producer gets a writable fd, which must reach no
  // other version's bytes. Publish moves a small one into an arena.
  TENSORD_ASSIGN_OR_RETURN(create.version,
                           registry_.Prepare(std::move(put.name), std::move(put.layout),
                                             put.total_bytes, put.retention,
                                             HostPlacement::kOwnMemfd));
  if (create.version.buffer != nullptr) {
    // Charged to tensord's memory, not to the producer that writes them.
    TENSORD_RETURN_IF_ERROR(create.version.buffer->AllocatePages());
    fd = create.version.buffer->fd();
    response.set_mapping_bytes(create.version.buffer->mapping_size());
  } else if (create.version.device_memory != nullptr) {
    TENSORD_ASSIGN_OR_RETURN(create.device_export,
                             ExportDevice(*create.version.device_memory,
                                          response.mutable_device_handle()));
    fd = KeepUntilSent(std::move(create.device_export.fd));
  }
  create.deadline = now + limits_.create_timeout;
  uint64_t id = next_id_++;
  response.set_create_id(id);
  response.set_replicas(replicas);
  creates_.emplace(id, std::move(create));
  return absl::OkStatus();
}

absl::Status HandoffSession::Seal(const v1::SealRequest& request, v1::SealResponse& response) {
  auto it = creates_.find(request.create_id());
  if (it == creates_.end()) {
    return absl::NotFoundError(absl::StrCat("create ", request.create_id(),
                                            " is not pending on this connection (sealed, aborted "
                                            "or reclaimed after the create timeout)"));
  }
  PendingVersion pending = std::move(it->second.version);
  creates_.erase(it);
  std::optional<uint32_t> expected;
  if (request.has_crc32c()) expected = request.crc32c();
  TENSORD_ASSIGN_OR_RETURN(VersionInfo info, registry_.Publish(std::move(pending), expected));
  metrics_.AddHandoffBytesReceived(info.total_bytes);
  Log(LogLevel::kInfo, "seal",
      {{"name", info.name}, {"version", info.version}, {"bytes", info.total_bytes},
       {"peer_pid", peer_.pid}});
  InfoToProto(info, response.mutable_info());
  return absl::OkStatus();
}

absl::Status HandoffSession::SealGroup(const v1::SealGroupRequest& request,
                                       v1::SealGroupResponse& response) {
  if (request.seals_size() == 0) {
    return absl::InvalidArgumentError("seal group names no create");
  }
  // Every create must be pending before any is consumed.
  absl::flat_hash_set<uint64_t> seen;
  for (const v1::SealRequest& seal : request.seals()) {
    const uint64_t id = seal.create_id();
    if (!creates_.contains(id)) {
      return absl::NotFoundError(absl::StrCat(
          "create ", id, " of the group is not pending on this connection (sealed, aborted or "
          "reclaimed after the create timeout); nothing was sealed"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("create ", id, " appears twice in one seal group; nothing was sealed"));
    }
  }
  std::vector<PendingVersion> group;
  std::vector<std::optional<uint32_t>> expected;
  for (const v1::SealRequest& seal : request.seals()) {
    auto it = creates_.find(seal.create_id());
    group.push_back(std::move(it->second.version));
    creates_.erase(it);
    expected.push_back(seal.has_crc32c() ? std::optional<uint32_t>(seal.crc32c()) : std::nullopt);
  }
  TENSORD_ASSIGN_OR_RETURN(std::vector<VersionInfo> infos,
                           registry_.PublishGroup(std::move(group), expected));
  uint64_t bytes = 0;
  for (const VersionInfo& info : infos) {
    bytes += info.total_bytes;
    InfoToProto(info, response.add_infos());
  }
  metrics_.AddHandoffBytesReceived(bytes);
  Log(LogLevel::kInfo, "seal_group",
      {{"tensors", infos.size()}, {"version", infos.front().version}, {"bytes", bytes},
       {"peer_pid", peer_.pid}});
  return absl::OkStatus();
}

absl::Status HandoffSession::Abort(const v1::AbortRequest& request) {
  if (creates_.erase(request.create_id()) == 0) {
    return absl::NotFoundError(
        absl::StrCat("create ", request.create_id(), " is not pending on this connection"));
  }
  return absl::OkStatus();
}

void HandoffSession::ReapExpiredCreates(absl::Time now) {
  absl::erase_if(creates_, [&](const auto& entry) {
    if (entry.second.deadline > now) return false;
    Log(LogLevel::kInfo, "create_reclaimed",
        {{"name", entry.second.version.name}, {"peer_pid", peer_.pid}});
    return true;
  });
}

}  // namespace tensord
