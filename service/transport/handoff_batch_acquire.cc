// A batch acquire on the handoff socket: N leases taken under one registry
// lock, described in as few packets as the packet size and the fds per
// packet allow (one for a thousand small versions in a mapped arena).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"
#include "service/common/unix_socket.h"
#include "service/transport/handoff_session.h"
#include "service/transport/request_validation.h"
#include "service/transport/tensor_service.h"
#include "service/wire/batch_limits.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

// Device exports one batch answer may hold open at once (each is an fd
// until its packet is sent); items beyond are refused with use_remote.
constexpr size_t kMaxDeviceExportsPerBatch = 4 * kMaxFdsPerPacket;

void SetItemStatus(const absl::Status& status, v1::AcquiredItem& item) {
  item.mutable_status()->set_code(static_cast<int32_t>(status.code()));
  item.mutable_status()->set_message(std::string(status.message()));
  item.set_use_remote(IsUseRemote(status));
}

// The prefix a connection may read under: the requested one when inside
// its scope, its scope's when that is narrower, else PERMISSION_DENIED.
absl::StatusOr<std::string> ScopedPrefix(const HandoffScope& scope, const std::string& requested) {
  if (absl::StartsWith(requested, scope.name_prefix)) return requested;
  if (absl::StartsWith(scope.name_prefix, requested)) return scope.name_prefix;
  return absl::PermissionDeniedError(
      absl::StrCat("batch acquire of prefix '", requested,
                   "' is not allowed: this connection reads only names starting with '",
                   scope.name_prefix, "'"));
}

}  // namespace

absl::StatusOr<std::vector<std::pair<uint32_t, absl::StatusOr<Lease>>>> HandoffSession::ChooseBatch(
    const v1::AcquireManyRequest& request) {
  TENSORD_RETURN_IF_ERROR(ValidateBatchSelection(
      "batch acquire", request.items_size(), kBatchItemLimit,
      request.has_prefix() ? std::optional<std::string>(request.prefix()) : std::nullopt,
      request.group_version()));
  if (!scope_.read) {
    return absl::PermissionDeniedError("this connection's token does not grant read");
  }
  std::vector<std::pair<uint32_t, absl::StatusOr<Lease>>> chosen;
  if (request.items_size() > 0) {
    std::vector<NameVersion> wanted;
    std::vector<uint32_t> wanted_index;
    chosen.reserve(request.items_size());
    for (int i = 0; i < request.items_size(); ++i) {
      const v1::NameVersion& item = request.items(i);
      chosen.emplace_back(static_cast<uint32_t>(i), absl::InternalError("not chosen"));
      if (absl::Status allowed = scope_.Check(item.name(), /*write_access=*/false); !allowed.ok()) {
        chosen.back().second = allowed;
        continue;
      }
      wanted.push_back({item.name(), item.version()});
      wanted_index.push_back(static_cast<uint32_t>(i));
    }
    // In a cluster, an item whose latest the cluster could not give says why.
    std::vector<NameVersion> leasing;
    std::vector<uint32_t> leasing_index;
    for (size_t i = 0; i < wanted.size(); ++i) {
      absl::StatusOr<uint64_t> version = VersionToRead(wanted[i].name, wanted[i].version);
      if (!version.ok()) {
        chosen[wanted_index[i]].second = version.status();
        continue;
      }
      wanted[i].version = *version;
      leasing.push_back(std::move(wanted[i]));
      leasing_index.push_back(wanted_index[i]);
    }
    std::vector<absl::StatusOr<Lease>> leases = registry_.AcquireMany(leasing);
    for (size_t i = 0; i < leases.size(); ++i) {
      chosen[leasing_index[i]].second = std::move(leases[i]);
    }
    return chosen;
  }
  std::vector<Lease> leases;
  if (request.has_prefix()) {
    TENSORD_ASSIGN_OR_RETURN(std::string prefix, ScopedPrefix(scope_, request.prefix()));
    TENSORD_ASSIGN_OR_RETURN(leases, registry_.AcquirePrefix(prefix, kBatchItemLimit));
  } else {
    TENSORD_ASSIGN_OR_RETURN(leases, registry_.AcquireGroup(request.group_version()));
    // All of a group or nothing.
    for (const Lease& lease : leases) {
      TENSORD_RETURN_IF_ERROR(scope_.Check(lease->name, /*write_access=*/false));
    }
  }
  chosen.reserve(leases.size());
  for (Lease& lease : leases) {
    chosen.emplace_back(static_cast<uint32_t>(chosen.size()), std::move(lease));
  }
  return chosen;
}

absl::Status HandoffSession::AcquireMany(const v1::AcquireManyRequest& request,
                                         v1::AcquireManyResponse& response, std::vector<int>& fds) {
  TENSORD_ASSIGN_OR_RETURN(auto chosen, ChooseBatch(request));
  size_t leasing = 0;
  for (const auto& [index, lease] : chosen) leasing += lease.ok() ? 1 : 0;
  if (leases_.size() + leasing > limits_.max_leases_per_connection) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch acquire of ", leasing, " versions on a connection holding ", leases_.size(),
        " leases; the limit (--max-leases-per-client) is ", limits_.max_leases_per_connection));
  }
  // Arenas whose fd the client has, or that this answer already carries.
  absl::flat_hash_set<uint64_t> arenas_known(request.mapped_arena_ids().begin(),
                                             request.mapped_arena_ids().end());
  std::vector<PendingPacket> packets(1);
  size_t packet_bytes = 0;
  size_t device_exports = 0;
  for (auto& [index, chosen_lease] : chosen) {
    v1::AcquiredItem item;
    item.set_index(index);
    int fd = -1;
    ScopedFd exported;
    absl::Status refused = chosen_lease.status();
    if (refused.ok()) {
      Lease& lease = *chosen_lease;
      const bool on_device = IsDeviceLayout(lease->layout);
      const HostBytes* host_bytes = on_device ? nullptr : lease->buffer.get();
      if (on_device && request.host_only()) {
        refused = MarkUseRemote(absl::FailedPreconditionError(absl::StrCat(
            "tensor '", lease->name, "' version ", lease->version, " is in ",
            DeviceLabel(lease->layout.device), " memory and host bytes were asked for")));
      } else if (host_bytes != nullptr && host_bytes->arena_id() != 0 &&
                 !request.accepts_arena_slots()) {
        refused = MarkUseRemote(absl::FailedPreconditionError(
            absl::StrCat("tensor '", lease->name,
                         "' is held in a shared arena and this client cannot map one")));
      }
      if (refused.ok()) {
        v1::AcquireResponse* acquired = item.mutable_acquire();
        InfoToProto(*lease, acquired->mutable_info());
        HeldLease held;
        if (on_device) {
          if (lease->device_memory != nullptr && device_exports == kMaxDeviceExportsPerBatch) {
            refused = MarkUseRemote(absl::ResourceExhaustedError(absl::StrCat(
                "device tensor '", lease->name, "': a batch acquire exports at most ",
                kMaxDeviceExportsPerBatch, " device allocations; acquire the rest in another")));
          } else if (lease->device_memory != nullptr) {
            absl::StatusOr<ExportedHandle> handle =
                ExportDevice(*lease->device_memory, acquired->mutable_device_handle());
            absl::Status below_ceiling =
                handle.ok()
                    ? CheckTensorFd(handle->fd.get(), absl::StrCat("export of '", lease->name, "'"))
                    : handle.status();
            if (below_ceiling.ok()) {
              held.device_export = *std::move(handle);
              exported = std::move(held.device_export.fd);
              fd = exported.get();
              ++device_exports;
            } else {
              refused = below_ceiling;
            }
          }
        } else {
          acquired->set_mapping_bytes(host_bytes->mapping_size());
          acquired->set_mapping_offset(host_bytes->mapping_offset());
          acquired->set_arena_id(host_bytes->arena_id());
          if (host_bytes->arena_id() == 0 || arenas_known.insert(host_bytes->arena_id()).second) {
            fd = host_bytes->fd();
          }
        }
        if (refused.ok()) {
          const uint64_t id = next_id_++;
          acquired->set_lease_id(id);
          metrics_.AddHandoffBytesSent(lease->total_bytes);
          held.lease = std::move(lease);
          leases_.emplace(id, std::move(held));
        }
      }
    }
    if (!refused.ok()) {
      item.clear_acquire();
      SetItemStatus(refused, item);
      fd = -1;
    }
    item.set_fd_attached(fd >= 0);
    const size_t item_bytes = item.ByteSizeLong() + 8;
    PendingPacket* packet = &packets.back();
    if (packet->items.items_size() > 0 &&
        (packet_bytes + item_bytes > kMaxBatchPacketBytes - 1024 ||
         (fd >= 0 && packet->fds.size() == kMaxFdsPerPacket))) {
      packets.emplace_back();
      packet = &packets.back();
      packet_bytes = 0;
    }
    packet_bytes += item_bytes;
    if (item.has_acquire()) packet->lease_ids.push_back(item.acquire().lease_id());
    *packet->items.add_items() = std::move(item);
    if (fd >= 0) packet->fds.push_back(fd);
    if (exported.valid()) packet->exported_fds.push_back(std::move(exported));
  }
  for (size_t i = 0; i + 1 < packets.size(); ++i) packets[i].items.set_more(true);
  pending_packets_.assign(std::make_move_iterator(packets.begin()),
                          std::make_move_iterator(packets.end()));
  return AcquireMore(response, fds);
}

void HandoffSession::DropPendingPackets() {
  for (const PendingPacket& packet : pending_packets_) {
    for (uint64_t id : packet.lease_ids) leases_.erase(id);
  }
  pending_packets_.clear();
}

absl::Status HandoffSession::AcquireMore(v1::AcquireManyResponse& response, std::vector<int>& fds) {
  if (pending_packets_.empty()) {
    return absl::FailedPreconditionError(
        "no batch acquire answer is pending on this connection (AcquireMore follows an "
        "AcquireMany whose last answer said more)");
  }
  PendingPacket packet = std::move(pending_packets_.front());
  pending_packets_.pop_front();
  response = std::move(packet.items);
  fds = std::move(packet.fds);
  // Exported fds stay open until this packet is sent.
  for (ScopedFd& fd : packet.exported_fds) sent_export_fds_.push_back(std::move(fd));
  return absl::OkStatus();
}

}  // namespace tensord
