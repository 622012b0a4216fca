#include "service/transport/handoff_session.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "service/common/episode_log.h"
#include "service/common/errno_status.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/transport/request_validation.h"
#include "service/transport/tensor_service.h"
#include "service/wire/batch_limits.h"
#include "service/wire/call_arena.h"
#include "service/wire/handoff_device_handle.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/status_conversion.h"

namespace tensord {

HandoffSession::Reply HandoffSession::Handle(absl::string_view packet, absl::Time now) {
  std::optional<Reply> reply = Handle(packet, now, nullptr);
  if (reply.has_value()) return *std::move(reply);
  v1::HandoffResponse response;
  return Encode(response, absl::InternalError("a reply that waits for the cluster needs a resume"),
                Reply());
}

std::optional<HandoffSession::Reply> HandoffSession::Handle(absl::string_view packet,
                                                            absl::Time now, const Resume& resume) {
  return Handle(packet, ScopedFd(), now, resume);
}

std::optional<HandoffSession::Reply> HandoffSession::Handle(absl::string_view packet, ScopedFd fd,
                                                            absl::Time now, const Resume& resume) {
  // Closed once this packet is answered, whatever the answer.
  packet_fd_ = std::move(fd);
  struct CloseAfter {
    ScopedFd& fd;
    ~CloseAfter() { fd.Reset(); }
  } close_after{packet_fd_};
  // The previous reply has been sent: its exported fds are no longer needed
  // (the keepalive, kept with the lease or create, holds the memory).
  sent_export_fds_.clear();
  google::protobuf::Arena arena(ManyNamesArenaOptions());
  if (packet_fd_.valid()) {
    // put_many, the one request that carries an fd (its memfd), parsed by
    // hand; any other packet, or a put_many it does not take, as below.
    WirePutManyRequest put_many;
    const auto* bytes = reinterpret_cast<const uint8_t*>(packet.data());
    if (ParseWirePutManyRequest({bytes, packet.size()}, put_many)) {
      return AnswerPutMany(put_many, arena, now);
    }
  }
  v1::HandoffRequest& request = *google::protobuf::Arena::CreateMessage<v1::HandoffRequest>(&arena);
  if (!request.ParseFromArray(packet.data(), static_cast<int>(packet.size()))) {
    v1::HandoffResponse response;
    return Encode(response,
                  absl::InvalidArgumentError(absl::StrCat("handoff packet of ", packet.size(),
                                                          " bytes is not a HandoffRequest")),
                  Reply());
  }
  if (packet_fd_.valid() && request.kind_case() != v1::HandoffRequest::kPutMany) {
    v1::HandoffResponse response;
    response.set_request_id(request.request_id());
    return Encode(response,
                  absl::InvalidArgumentError(
                      absl::StrCat("handoff request kind ", static_cast<int>(request.kind_case()),
                                   " came with an fd; only put_many carries one (its memfd)")),
                  Reply());
  }
  if (cluster_ != nullptr && resume != nullptr && authorized_ &&
      StartInCluster(request, now, resume)) {
    return std::nullopt;
  }
  return Answer(request, now);
}

HandoffSession::Reply HandoffSession::Answer(const v1::HandoffRequest& request, absl::Time now) {
  // On the request's arena when it has one: a put_many answer holds a
  // result per item, each a message of its own.
  google::protobuf::Arena* const arena = request.GetArena();
  std::optional<v1::HandoffResponse> on_heap;
  v1::HandoffResponse& response =
      arena != nullptr ? *google::protobuf::Arena::CreateMessage<v1::HandoffResponse>(arena)
                       : on_heap.emplace();
  response.set_request_id(request.request_id());
  Reply reply;
  std::string batch_answer;
  const absl::Status status = Dispatch(request, now, response, reply.fds, batch_answer);
  reply = Finish(response, status, std::move(reply), now);
  const bool batch = request.kind_case() == v1::HandoffRequest::kAcquireMany ||
                     request.kind_case() == v1::HandoffRequest::kAcquireMore;
  if (status.ok() && batch) AppendAcquireManyField(batch_answer, reply.bytes);
  return reply;
}

HandoffSession::Reply HandoffSession::AnswerPutMany(WirePutManyRequest& request,
                                                    google::protobuf::Arena& arena,
                                                    absl::Time now) {
  v1::HandoffResponse& response =
      *google::protobuf::Arena::CreateMessage<v1::HandoffResponse>(&arena);
  response.set_request_id(request.request_id);
  absl::Status status = Admit(request.release_lease_ids, /*continues_batch=*/false);
  if (status.ok()) status = PutMany(request, std::move(packet_fd_), *response.mutable_put_many());
  return Finish(response, status, Reply(), now);
}

HandoffSession::Reply HandoffSession::Finish(v1::HandoffResponse& response,
                                             const absl::Status& status, Reply reply,
                                             absl::Time now) {
  if (!status.ok() && IsFdExhaustion(status)) {
    FdExhaustionLog().Note("handoff request", status.message(), now);
  }
  return Encode(response, status, std::move(reply));
}

HandoffSession::Reply HandoffSession::Encode(v1::HandoffResponse& response,
                                             const absl::Status& status, Reply reply) {
  if (!status.ok()) {
    response.clear_kind();
    reply.fds.clear();
    response.set_code(static_cast<int32_t>(status.code()));
    response.set_message(std::string(status.message()));
    response.set_use_remote(IsUseRemote(status));
  }
  reply.bytes = response.SerializeAsString();
  return reply;
}

bool HandoffSession::StartInCluster(const v1::HandoffRequest& request, absl::Time now,
                                    const Resume& resume) {
  std::vector<std::string> names;
  switch (request.kind_case()) {
    case v1::HandoffRequest::kAcquire:
      if (request.acquire().version() == 0 &&
          scope_.Check(request.acquire().name(), /*write_access=*/false).ok()) {
        names.push_back(request.acquire().name());
      }
      break;
    case v1::HandoffRequest::kAcquireMany:
      for (const v1::NameVersion& item : request.acquire_many().items()) {
        if (item.version() == 0 && scope_.Check(item.name(), /*write_access=*/false).ok()) {
          names.push_back(item.name());
        }
      }
      break;
    case v1::HandoffRequest::kSeal: return SealInCluster(request, resume);
    case v1::HandoffRequest::kSealGroup: return SealGroupInCluster(request, resume);
    default: break;
  }
  if (names.empty()) return false;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // The read goes on once the cluster made sure of the latest versions,
  // off this loop (it may wait for etcd or another node).
  cluster_->EnsureLatest(
      names, [this, names, request, now, resume](std::vector<absl::StatusOr<Lease>> confirmed) {
        auto leases = std::make_shared<absl::flat_hash_map<std::string, absl::StatusOr<Lease>>>();
        for (size_t i = 0; i < names.size(); ++i)
          leases->emplace(names[i], std::move(confirmed[i]));
        resume([this, request, now, leases]() {
          cluster_leases_ = leases.get();
          Reply reply = Answer(request, now);
          cluster_leases_ = nullptr;
          return reply;
        });
      });
  return true;
}

absl::StatusOr<uint64_t> HandoffSession::VersionToRead(absl::string_view name,
                                                       uint64_t version) const {
  if (cluster_ == nullptr || version != 0 || cluster_leases_ == nullptr) return version;
  auto it = cluster_leases_->find(std::string(name));
  if (it == cluster_leases_->end()) return version;
  if (!it->second.ok()) return it->second.status();
  return (*it->second)->version;
}

int HandoffSession::KeepUntilSent(ScopedFd fd) {
  sent_export_fds_.push_back(std::move(fd));
  return sent_export_fds_.back().get();
}

absl::Status HandoffSession::Dispatch(const v1::HandoffRequest& request, absl::Time now,
                                      v1::HandoffResponse& response, std::vector<int>& fds,
                                      std::string& batch_answer) {
  if (request.kind_case() == v1::HandoffRequest::kAuthenticate) {
    return Authenticate(request.authenticate());
  }
  TENSORD_RETURN_IF_ERROR(Admit(
      {request.release_lease_ids().data(), static_cast<size_t>(request.release_lease_ids_size())},
      /*continues_batch=*/request.kind_case() == v1::HandoffRequest::kAcquireMore));
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
      return AcquireMany(request.acquire_many(), batch_answer, fds);
    case v1::HandoffRequest::kAcquireMore: return AcquireMore(batch_answer, fds);
    default: return DispatchWithoutFd(request, response);
  }
  if (fd >= 0) fds.push_back(fd);
  return status;
}

absl::Status HandoffSession::Admit(std::span<const uint64_t> release_lease_ids,
                                   bool continues_batch) {
  if (!authorized_) {
    return absl::PermissionDeniedError(absl::StrCat(
        "peer uid ", peer_.uid, " gid ", peer_.gid, " (pid ", peer_.pid,
        ") is not on the handoff allow-list (--handoff-allow-uid/--handoff-allow-gid); "
        "authenticate with a token from IssueHandoffToken"));
  }
  if (release_lease_ids.size() > kMaxLeasesPerRelease) {
    return absl::InvalidArgumentError(absl::StrCat("request ends ", release_lease_ids.size(),
                                                   " leases (release_lease_ids); the limit is ",
                                                   kMaxLeasesPerRelease, " per request"));
  }
  for (uint64_t lease_id : release_lease_ids) leases_.erase(lease_id);
  // Any other request ends an unfinished batch answer.
  if (!continues_batch) DropPendingPackets();
  return absl::OkStatus();
}

absl::Status HandoffSession::DispatchWithoutFd(const v1::HandoffRequest& request,
                                               v1::HandoffResponse& response) {
  switch (request.kind_case()) {
    case v1::HandoffRequest::kRelease: return Release(request.release());
    case v1::HandoffRequest::kSeal: return Seal(request.seal(), *response.mutable_seal());
    case v1::HandoffRequest::kAbort: return Abort(request.abort());
    case v1::HandoffRequest::kSealGroup:
      return SealGroup(request.seal_group(), *response.mutable_seal_group());
    case v1::HandoffRequest::kPutMany:
      return PutMany(request.put_many(), std::move(packet_fd_), *response.mutable_put_many());
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "handoff request kind ", static_cast<int>(request.kind_case()), " is unknown"));
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

absl::Status HandoffSession::Acquire(const v1::AcquireRequest& request,
                                     v1::AcquireResponse& response, int& fd) {
  TENSORD_RETURN_IF_ERROR(scope_.Check(request.name(), /*write_access=*/false));
  TENSORD_ASSIGN_OR_RETURN(const uint64_t version,
                           VersionToRead(request.name(), request.version()));
  TENSORD_ASSIGN_OR_RETURN(Lease lease, registry_.Acquire(request.name(), version));
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
    return MarkUseRemote(absl::FailedPreconditionError(
        absl::StrCat("tensor '", lease->name, "' version ", lease->version,
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
      TENSORD_ASSIGN_OR_RETURN(
          held_lease.device_export,
          ExportDevice(*lease->device_memory, response.mutable_device_handle()));
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
  const size_t count = request.lease_ids_size();
  if (count == 0) return absl::InvalidArgumentError("release names no lease");
  if (count > kMaxLeasesPerRelease) {
    return absl::InvalidArgumentError(absl::StrCat("release of ", count, " leases; the limit is ",
                                                   kMaxLeasesPerRelease, " per request"));
  }
  size_t unknown = 0;
  uint64_t first_unknown = 0;
  for (uint64_t lease_id : request.lease_ids()) {
    if (leases_.erase(lease_id) == 0 && unknown++ == 0) first_unknown = lease_id;
  }
  if (unknown == 1 && count == 1) {
    return absl::NotFoundError(
        absl::StrCat("lease ", first_unknown, " is not held by this connection"));
  }
  if (unknown > 0) {
    return absl::NotFoundError(absl::StrCat(unknown, " of ", count,
                                            " leases (the first: ", first_unknown,
                                            ") are not held by this connection; the others "
                                            "were released"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ValidatedPut> HandoffSession::CheckWrite(const std::string& name,
                                                        const v1::TensorLayout& layout,
                                                        uint64_t total_bytes,
                                                        v1::Retention retention) const {
  return CheckWrite(name, WireLayoutOf(layout), total_bytes, retention);
}

absl::StatusOr<ValidatedPut> HandoffSession::CheckWrite(absl::string_view name, WireLayout layout,
                                                        uint64_t total_bytes,
                                                        int32_t retention) const {
  TENSORD_ASSIGN_OR_RETURN(
      ValidatedPut put,
      ValidatePutFields(name, std::move(layout), total_bytes, retention, limits_.max_tensor_bytes));
  TENSORD_RETURN_IF_ERROR(scope_.Check(put.name, /*write_access=*/true));
  return put;
}

absl::Status HandoffSession::Create(const v1::CreateRequest& request, absl::Time now,
                                    v1::CreateResponse& response, int& fd) {
  TENSORD_ASSIGN_OR_RETURN(
      ValidatedPut put,
      CheckWrite(request.name(), request.layout(), request.total_bytes(), request.retention()));
  // The copies are checked before anything is allocated, as a Put's
  // header is (from memory: nothing here waits on etcd).
  uint32_t replicas = 0;  // single node: nothing for the producer to await
  if (cluster_ != nullptr) {
    TENSORD_ASSIGN_OR_RETURN(replicas,
                             cluster_->ReplicasFor(put.name, request.replicas(), put.retention));
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
  TENSORD_ASSIGN_OR_RETURN(
      create.version, registry_.Prepare(std::move(put.name), std::move(put.layout), put.total_bytes,
                                        put.retention, HostPlacement::kOwnMemfd));
  if (create.version.buffer != nullptr) {
    // Charged to tensord's memory, not to the producer that writes them.
    TENSORD_RETURN_IF_ERROR(create.version.buffer->AllocatePages());
    fd = create.version.buffer->fd();
    response.set_mapping_bytes(create.version.buffer->mapping_size());
  } else if (create.version.device_memory != nullptr) {
    TENSORD_ASSIGN_OR_RETURN(create.device_export, ExportDevice(*create.version.device_memory,
                                                                response.mutable_device_handle()));
    fd = KeepUntilSent(std::move(create.device_export.fd));
  }
  create.deadline = now + limits_.create_timeout;
  create.replicas = std::max<uint32_t>(replicas, 1);
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
      {{"name", info.name},
       {"version", info.version},
       {"bytes", info.total_bytes},
       {"peer_pid", peer_.pid}});
  InfoToProto(info, response.mutable_info());
  return absl::OkStatus();
}

absl::Status HandoffSession::SealGroup(const v1::SealGroupRequest& request,
                                       v1::SealGroupResponse& response) {
  std::vector<std::optional<uint32_t>> expected;
  TENSORD_ASSIGN_OR_RETURN(std::vector<PendingVersion> group, TakeGroup(request, expected));
  TENSORD_ASSIGN_OR_RETURN(std::vector<VersionInfo> infos,
                           registry_.PublishGroup(std::move(group), expected));
  uint64_t bytes = 0;
  for (const VersionInfo& info : infos) {
    bytes += info.total_bytes;
    InfoToProto(info, response.add_infos());
  }
  metrics_.AddHandoffBytesReceived(bytes);
  Log(LogLevel::kInfo, "seal_group",
      {{"tensors", infos.size()},
       {"version", infos.front().version},
       {"bytes", bytes},
       {"peer_pid", peer_.pid}});
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PendingVersion>> HandoffSession::TakeGroup(
    const v1::SealGroupRequest& request, std::vector<std::optional<uint32_t>>& expected) {
  if (request.seals_size() == 0) {
    return absl::InvalidArgumentError("seal group names no create");
  }
  // Every create must be pending before any is consumed.
  absl::flat_hash_set<uint64_t> seen;
  for (const v1::SealRequest& seal : request.seals()) {
    const uint64_t id = seal.create_id();
    if (!creates_.contains(id)) {
      return absl::NotFoundError(
          absl::StrCat("create ", id,
                       " of the group is not pending on this connection (sealed, aborted or "
                       "reclaimed after the create timeout); nothing was sealed"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("create ", id, " appears twice in one seal group; nothing was sealed"));
    }
  }
  std::vector<PendingVersion> group;
  for (const v1::SealRequest& seal : request.seals()) {
    auto it = creates_.find(seal.create_id());
    group.push_back(std::move(it->second.version));
    creates_.erase(it);
    expected.push_back(seal.has_crc32c() ? std::optional<uint32_t>(seal.crc32c()) : std::nullopt);
  }
  return group;
}

bool HandoffSession::SealInCluster(const v1::HandoffRequest& request, const Resume& resume) {
  auto it = creates_.find(request.seal().create_id());
  if (it == creates_.end()) return false;  // answered now, as NOT_FOUND
  PendingVersion pending = std::move(it->second.version);
  const uint32_t replicas = it->second.replicas;
  creates_.erase(it);
  std::optional<uint32_t> expected;
  if (request.seal().has_crc32c()) expected = request.seal().crc32c();
  const uint64_t request_id = request.request_id();
  auto answer = [this, request_id](absl::StatusOr<VersionInfo> info) {
    v1::HandoffResponse response;
    response.set_request_id(request_id);
    if (info.ok()) {
      metrics_.AddHandoffBytesReceived(info->total_bytes);
      Log(LogLevel::kInfo, "seal",
          {{"name", info->name},
           {"version", info->version},
           {"bytes", info->total_bytes},
           {"origin", info->origin},
           {"peer_pid", peer_.pid}});
      InfoToProto(*info, response.mutable_seal()->mutable_info());
    }
    return Encode(response, info.status(), Reply());
  };
  absl::StatusOr<SealedVersion> sealed = registry_.Seal(std::move(pending), expected);
  if (!sealed.ok()) {
    resume([answer, status = sealed.status()]() mutable { return answer(status); });
    return true;
  }
  cluster_->Commit(*std::move(sealed), replicas,
                   [answer, resume](absl::StatusOr<VersionInfo> info) mutable {
                     resume([answer, info = std::move(info)]() mutable { return answer(info); });
                   });
  return true;
}

bool HandoffSession::SealGroupInCluster(const v1::HandoffRequest& request, const Resume& resume) {
  // The group's items get the most copies any of their creates asked for.
  uint32_t replicas = 1;
  for (const v1::SealRequest& seal : request.seal_group().seals()) {
    if (auto it = creates_.find(seal.create_id()); it != creates_.end()) {
      replicas = std::max(replicas, it->second.replicas);
    }
  }
  std::vector<std::optional<uint32_t>> expected;
  absl::StatusOr<std::vector<PendingVersion>> group = TakeGroup(request.seal_group(), expected);
  if (!group.ok()) return false;  // answered now, with why
  const uint64_t request_id = request.request_id();
  auto answer = [this, request_id](absl::StatusOr<std::vector<VersionInfo>> infos) {
    v1::HandoffResponse response;
    response.set_request_id(request_id);
    if (infos.ok()) {
      uint64_t bytes = 0;
      for (const VersionInfo& info : *infos) {
        bytes += info.total_bytes;
        InfoToProto(info, response.mutable_seal_group()->add_infos());
      }
      // Ordered by etcd (durable items): the group's cluster-wide identity,
      // as BatchPut answers it.
      response.mutable_seal_group()->set_cluster_group(
          static_cast<uint64_t>(infos->front().origin));
      metrics_.AddHandoffBytesReceived(bytes);
      Log(LogLevel::kInfo, "seal_group",
          {{"tensors", infos->size()},
           {"version", infos->front().version},
           {"bytes", bytes},
           {"peer_pid", peer_.pid}});
    }
    return Encode(response, infos.status(), Reply());
  };
  absl::StatusOr<std::vector<SealedVersion>> sealed =
      registry_.SealGroup(*std::move(group), expected);
  if (!sealed.ok()) {
    resume([answer, status = sealed.status()]() mutable { return answer(status); });
    return true;
  }
  cluster_->CommitGroup(
      *std::move(sealed), replicas,
      [answer, resume](absl::StatusOr<std::vector<VersionInfo>> infos) mutable {
        resume([answer, infos = std::move(infos)]() mutable { return answer(infos); });
      });
  return true;
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
