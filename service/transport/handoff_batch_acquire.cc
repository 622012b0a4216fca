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

// Items one packet of a batch answer holds at most. Each packet is written
// when it is asked for, and the client asks for the next before it adopts
// the items of this one: the server writes a packet while the client
// adopts the one before.
constexpr size_t kMaxItemsPerBatchPacket = 256;
// The largest items vector the handoff thread keeps for its next batch
// answer (SpareBatchItems).
constexpr size_t kMaxSpareBatchItems = 4096;

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
    // Every item's entry is set below: its refusal or its lease.
    chosen.reserve(request.items_size());
    std::vector<NameVersionView> leasing;
    std::vector<uint32_t> leasing_index;
    leasing.reserve(request.items_size());
    leasing_index.reserve(request.items_size());
    for (int i = 0; i < request.items_size(); ++i) {
      const v1::NameVersion& item = request.items(i);
      chosen.emplace_back(static_cast<uint32_t>(i), absl::StatusOr<Lease>());
      if (absl::Status allowed = scope_.Check(item.name(), /*write_access=*/false); !allowed.ok()) {
        chosen.back().second = allowed;
        continue;
      }
      // In a cluster, an item whose latest the cluster could not give says why.
      absl::StatusOr<uint64_t> version = VersionToRead(item.name(), item.version());
      if (!version.ok()) {
        chosen.back().second = version.status();
        continue;
      }
      leasing.push_back({item.name(), *version});
      leasing_index.push_back(static_cast<uint32_t>(i));
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

absl::Status HandoffSession::AcquireMany(const v1::AcquireManyRequest& request, std::string& answer,
                                         std::vector<int>& fds) {
  TENSORD_ASSIGN_OR_RETURN(auto chosen, ChooseBatch(request));
  size_t leasing = 0;
  for (const auto& [index, lease] : chosen) leasing += lease.ok() ? 1 : 0;
  if (leases_.size() + leasing > limits_.max_leases_per_connection) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch acquire of ", leasing, " versions on a connection holding ", leases_.size(),
        " leases; the limit (--max-leases-per-client) is ", limits_.max_leases_per_connection));
  }
  PendingBatch& batch = pending_batch_.emplace();
  batch.items = std::move(SpareBatchItems());
  batch.arenas_known.insert(request.mapped_arena_ids().begin(), request.mapped_arena_ids().end());
  batch.next = 0;
  batch.device_exports = 0;
  batch.host_only = request.host_only();
  batch.accepts_arena_slots = request.accepts_arena_slots();
  batch.items.reserve(chosen.size());
  for (auto& [index, chosen_lease] : chosen) {
    PendingBatchItem& item = batch.items.emplace_back();
    item.fields.index = index;
    if (chosen_lease.ok()) {
      item.chosen = *std::move(chosen_lease);
    } else {
      item.fields.refusal = chosen_lease.status();
    }
  }
  return AcquireMore(answer, fds);
}

absl::Status HandoffSession::LeaseItem(PendingBatch& batch, Lease& lease, PendingBatchItem& item) {
  const bool on_device = IsDeviceLayout(lease->layout);
  const HostBytes* host_bytes = on_device ? nullptr : lease->buffer.get();
  if (on_device && batch.host_only) {
    return MarkUseRemote(absl::FailedPreconditionError(
        absl::StrCat("tensor '", lease->name, "' version ", lease->version, " is in ",
                     DeviceLabel(lease->layout.device), " memory and host bytes were asked for")));
  }
  if (host_bytes != nullptr && host_bytes->arena_id() != 0 && !batch.accepts_arena_slots) {
    return MarkUseRemote(absl::FailedPreconditionError(absl::StrCat(
        "tensor '", lease->name, "' is held in a shared arena and this client cannot map one")));
  }
  AcquiredItemFields& fields = item.fields;
  if (on_device && lease->device_memory != nullptr) {
    if (batch.device_exports == kMaxDeviceExportsPerBatch) {
      return MarkUseRemote(absl::ResourceExhaustedError(absl::StrCat(
          "device tensor '", lease->name, "': a batch acquire exports at most ",
          kMaxDeviceExportsPerBatch, " device allocations; acquire the rest in another")));
    }
    item.device_handle.emplace();
    absl::StatusOr<ExportedHandle> handle =
        ExportDevice(*lease->device_memory, &*item.device_handle);
    TENSORD_RETURN_IF_ERROR(handle.status());
    TENSORD_RETURN_IF_ERROR(
        CheckTensorFd(handle->fd.get(), absl::StrCat("export of '", lease->name, "'")));
    item.held.device_export = *std::move(handle);
    item.exported = std::move(item.held.device_export.fd);
    ++batch.device_exports;
  } else if (!on_device) {
    fields.mapping_bytes = host_bytes->mapping_size();
    fields.mapping_offset = host_bytes->mapping_offset();
    fields.arena_id = host_bytes->arena_id();
  }
  fields.version = &*lease;
  fields.lease_id = next_id_++;
  item.held.lease = std::move(lease);
  return absl::OkStatus();
}

void HandoffSession::DropPendingPackets() {
  if (!pending_batch_.has_value()) return;
  std::vector<PendingBatchItem> items = std::move(pending_batch_->items);
  pending_batch_.reset();
  items.clear();  // the unsent items' leases end here
  std::vector<PendingBatchItem>& spare = SpareBatchItems();
  if (items.capacity() <= kMaxSpareBatchItems && items.capacity() > spare.capacity()) {
    spare = std::move(items);
  }
}

std::vector<HandoffSession::PendingBatchItem>& HandoffSession::SpareBatchItems() {
  thread_local std::vector<PendingBatchItem> spare;
  return spare;
}

absl::Status HandoffSession::AcquireMore(std::string& answer, std::vector<int>& fds) {
  if (!pending_batch_.has_value()) {
    return absl::FailedPreconditionError(
        "no batch acquire answer is pending on this connection (AcquireMore follows an "
        "AcquireMany whose last answer said more)");
  }
  PendingBatch& batch = *pending_batch_;
  answer.clear();
  size_t items = 0;
  while (batch.next < batch.items.size()) {
    PendingBatchItem& item = batch.items[batch.next];
    if (item.chosen.has_value()) {
      Lease lease = *std::move(item.chosen);
      item.chosen.reset();
      if (absl::Status refused = LeaseItem(batch, lease, item); !refused.ok()) {
        const uint32_t index = item.fields.index;
        item = PendingBatchItem{};
        item.fields.index = index;
        item.fields.refusal = std::move(refused);
      }
    }
    AcquiredItemFields& fields = item.fields;
    const bool arena_new = fields.arena_id != 0 && !batch.arenas_known.contains(fields.arena_id);
    int fd = -1;
    if (item.exported.valid()) {
      fd = item.exported.get();
    } else if (fields.version != nullptr && !IsDeviceLayout(fields.version->layout) &&
               (fields.arena_id == 0 || arena_new)) {
      fd = fields.version->buffer->fd();
    }
    fields.fd_attached = fd >= 0;
    fields.device_handle = item.device_handle.has_value() ? &*item.device_handle : nullptr;
    const AcquiredItemWire wire(fields);
    // Room is left for the answer's own fields (request id, more).
    if (items > 0 && (items == kMaxItemsPerBatchPacket ||
                      answer.size() + wire.field_size() > kMaxBatchPacketBytes - 1024 ||
                      (fd >= 0 && fds.size() == kMaxFdsPerPacket))) {
      break;
    }
    const size_t at = answer.size();
    answer.resize(at + wire.field_size());
    wire.WriteField(reinterpret_cast<uint8_t*>(answer.data()) + at);
    if (arena_new) batch.arenas_known.insert(fields.arena_id);
    if (fd >= 0) fds.push_back(fd);
    // Exported fds stay open until this packet is sent.
    if (item.exported.valid()) sent_export_fds_.push_back(std::move(item.exported));
    if (fields.version != nullptr) {
      metrics_.AddHandoffBytesSent(fields.version->total_bytes);
      leases_.emplace(fields.lease_id, std::move(item.held));
    }
    ++batch.next;  // the item stays, moved from, until the batch ends
    ++items;
  }
  if (batch.next == batch.items.size()) {
    DropPendingPackets();
  } else {
    answer.append(kMoreItemsFollowField, 2);
  }
  return absl::OkStatus();
}

}  // namespace tensord
