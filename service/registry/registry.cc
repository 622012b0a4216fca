#include "service/registry/registry.h"
#include "absl/strings/string_view.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/crc32c.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;

std::string EncodePageToken(absl::string_view last_name) {
  return absl::WebSafeBase64Escape(last_name);
}

absl::StatusOr<std::string> DecodePageToken(absl::string_view token) {
  std::string last_name;
  if (!absl::WebSafeBase64Unescape(token, &last_name) || !ValidateTensorName(last_name).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token '", absl::CHexEscape(token.substr(0, 100)),
                     "' is not a token from an earlier List response"));
  }
  return last_name;
}

void LogEvicted(const std::vector<std::shared_ptr<const TensorVersion>>& evicted) {
  if (evicted.empty() || !LogEnabled(LogLevel::kInfo)) return;
  uint64_t bytes = 0;
  for (const auto& version : evicted) bytes += version->total_bytes;
  Log(LogLevel::kInfo, "evicted",
      {{"versions", evicted.size()}, {"bytes", bytes}, {"oldest", evicted.front()->name}});
}

// Arenas need F_SEAL_FUTURE_WRITE (Linux >= 5.1); without it small
// versions keep a memfd each, as before arenas, rather than failing.
ArenaPoolOptions ArenasForThisKernel(ArenaPoolOptions options) {
  if (options.max_slot_bytes != 0 && !ArenaPool::Supported()) {
    Log(LogLevel::kWarning, "arenas_off",
        {{"reason", "the kernel lacks F_SEAL_FUTURE_WRITE (Linux >= 5.1)"},
         {"hint", "every tensor gets a memfd of its own: live tensors are bounded by fds"}});
    options.max_slot_bytes = 0;
  }
  return options;
}

// Spares are sealed F_SEAL_FUTURE_WRITE, as arenas are: none without it.
SpareBufferOptions SparesForThisKernel(SpareBufferOptions options) {
  if (!ArenaPool::Supported()) options.max_bytes = 0;
  return options;
}

}  // namespace

std::string DeviceLabel(const DLDevice& device) {
  switch (device.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return absl::StrCat("cuda:", device.device_id);
    case kDLCUDAHost: return "cuda_host";
    default: break;
  }
  return absl::StrCat("device_type_", static_cast<int>(device.device_type), ":", device.device_id);
}

VersionInfo InfoOf(const TensorVersion& version) {
  VersionInfo info;
  static_cast<VersionDescription&>(info) = version;
  info.open_leases = version.open_leases.load(std::memory_order_relaxed);
  info.origin = version.origin.load(std::memory_order_relaxed);
  return info;
}

Registry::Registry(const RegistryOptions& options)
    : options_(options),
      host_capacity_(
          CapacityAccount::Create(options.max_host_bytes, "host memory (--max-host-bytes)")),
      arenas_(ArenasForThisKernel(options.arenas)),
      spares_(SpareBuffers::Create(SparesForThisKernel(options.spare_buffers), host_capacity_)),
      changes_(options.watch_history_items) {
  const int devices = options.device_backend ? options.device_backend->device_count() : 0;
  for (int device = 0; device < devices; ++device) {
    device_capacity_.push_back(CapacityAccount::Create(
        options.max_device_bytes,
        absl::StrCat("device memory of ", DeviceLabel(DLDevice{kDLCUDA, device}),
                     " (--max-device-bytes)")));
  }
}

absl::StatusOr<PendingVersion> Registry::PrepareOnDevice(std::string name,
                                                         dlpack::TensorLayout layout,
                                                         uint64_t total_bytes,
                                                         Retention retention) {
  const std::string device = DeviceLabel(layout.device);
  if (options_.device_backend == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tensor '", name, "' asks for ", device,
        " memory but this server has no device backend (start it with --device-backend=cuda "
        "on a GPU host, or --device-backend=simulated)"));
  }
  if (layout.device.device_id < 0 || layout.device.device_id >= device_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", device, " of tensor '", name, "' does not exist: this server's ",
        options_.device_backend->name(), " backend has ", device_count(), " device(s)"));
  }
  if (retention == Retention::kCache) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "' on ", device,
                     " cannot have cache retention: device tensors are never evicted"));
  }
  PendingVersion pending;
  TENSORD_ASSIGN_OR_RETURN(pending.reservation,
                           device_capacity_[layout.device.device_id]->Reserve(total_bytes));
  if (total_bytes > 0) {
    // VMM (POSIX fd) when the driver offers it: an importer's mapping holds
    // the physical memory, so a version freed here (lease ended, connection
    // dropped, create reclaimed) can never be reused under a process that
    // still maps it. Legacy IPC gives no such guarantee (docs/gpu.md).
    const int device = layout.device.device_id;
    const HandleKind kind =
        options_.device_backend->SupportsHandleKind(device, HandleKind::kPosixFd)
            ? HandleKind::kPosixFd
            : HandleKind::kLegacyIpc;
    TENSORD_ASSIGN_OR_RETURN(pending.device_memory,
                             options_.device_backend->Allocate(device, total_bytes, kind));
  }
  pending.retention = retention;
  pending.name = std::move(name);
  pending.layout = std::move(layout);
  pending.total_bytes = total_bytes;
  return pending;
}

absl::StatusOr<ByteReservation> Registry::ReserveHost(uint64_t bytes) {
  absl::StatusOr<ByteReservation> reservation = host_capacity_->Reserve(bytes);
  auto short_of_room = [&] {
    return !reservation.ok() &&
           reservation.status().code() == absl::StatusCode::kResourceExhausted &&
           bytes <= host_capacity_->limit_bytes();
  };
  // Spare memfds give their room back first, then cache versions make
  // room (an evicted version's memfd becomes a spare: given back too).
  // Bounded: another put may take the freed bytes first, and then this one
  // is refused.
  for (int attempt = 0; attempt < 3 && short_of_room(); ++attempt) {
    if (ReleaseSpareRoom(bytes)) {
      reservation = host_capacity_->Reserve(bytes);
      if (!short_of_room()) break;
    }
    EvictTo(host_capacity_->limit_bytes() - bytes);
    ReleaseSpareRoom(bytes);
    reservation = host_capacity_->Reserve(bytes);
  }
  return reservation;
}

std::string Registry::AccessDomain(absl::string_view name) const {
  return options_.arena_domain ? options_.arena_domain(name) : "";
}

bool Registry::ReleaseSpareRoom(uint64_t bytes) {
  const uint64_t wanted = host_capacity_->used_bytes() + bytes;
  const uint64_t limit = host_capacity_->limit_bytes();
  return wanted > limit && spares_->Release(wanted - limit) > 0;
}

absl::StatusOr<PendingVersion> Registry::Prepare(std::string name, dlpack::TensorLayout layout,
                                                 uint64_t total_bytes, Retention retention,
                                                 HostPlacement placement) {
  if (IsDeviceLayout(layout)) {
    return PrepareOnDevice(std::move(name), std::move(layout), total_bytes, retention);
  }
  PendingVersion pending;
  pending.retention = retention;
  const uint64_t slot_bytes =
      placement == HostPlacement::kAuto ? arenas_.SlotBytesFor(total_bytes) : 0;
  const bool recyclable = slot_bytes == 0 && placement == HostPlacement::kAuto &&
                          options_.page_policy == PagePolicy::kNormal &&
                          spares_->Serves(total_bytes);
  std::string domain = slot_bytes != 0 || recyclable ? AccessDomain(name) : "";
  std::optional<SpareBuffers::Reused> reused;
  if (recyclable) reused = spares_->Take(total_bytes, domain);
  if (reused.has_value()) {
    // The spare's room in the budget is the put's: nothing to reserve.
    pending.reservation = std::move(reused->reservation);
    pending.buffer = std::move(reused->buffer);
  } else {
    // The tensor's bytes, wherever they live (a slot rounds them up by at
    // most a quarter plus a page, as a memfd of its own rounds to a page).
    TENSORD_ASSIGN_OR_RETURN(pending.reservation, ReserveHost(total_bytes));
    if (slot_bytes != 0) {
      TENSORD_ASSIGN_OR_RETURN(pending.buffer, arenas_.Allocate(total_bytes, domain));
    } else if (recyclable) {
      TENSORD_ASSIGN_OR_RETURN(pending.buffer,
                               spares_->Create(total_bytes, name, std::move(domain)));
    } else {
      TENSORD_ASSIGN_OR_RETURN(pending.buffer,
                               HostBuffer::Create(total_bytes, name, options_.page_policy));
    }
  }
  pending.name = std::move(name);
  pending.layout = std::move(layout);
  pending.total_bytes = total_bytes;
  return pending;
}

void Registry::MoveIntoArena(PendingVersion& pending) {
  if (arenas_.SlotBytesFor(pending.total_bytes) == 0 || pending.buffer->arena_id() != 0) return;
  absl::StatusOr<std::unique_ptr<ArenaSlot>> slot =
      arenas_.Allocate(pending.total_bytes, AccessDomain(pending.name));
  if (!slot.ok() || !(*slot)->Write(0, pending.buffer->data(), pending.total_bytes).ok() ||
      !(*slot)->Seal().ok()) {
    return;
  }
  pending.buffer = *std::move(slot);  // the memfd and its fd go now
}

absl::StatusOr<std::shared_ptr<TensorVersion>> Registry::SealBytes(
    PendingVersion& pending, std::optional<uint32_t> expected_crc32c) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(pending.name));
  const bool on_device = IsDeviceLayout(pending.layout);
  const bool has_bytes =
      on_device
          ? (pending.total_bytes == 0 ? pending.device_memory == nullptr
                                      : pending.device_memory != nullptr &&
                                            pending.device_memory->size() == pending.total_bytes)
          : pending.buffer != nullptr && pending.buffer->size() == pending.total_bytes;
  if (!has_bytes) {
    return absl::InternalError(absl::StrCat("publish of '", pending.name, "' without a buffer of ",
                                            pending.total_bytes, " bytes"));
  }
  TENSORD_RETURN_IF_ERROR(dlpack::ValidateLayoutFits(pending.layout, pending.total_bytes));
  if (pending.reservation.bytes() < pending.total_bytes) {
    return absl::InternalError(absl::StrCat("publish of '", pending.name, "' reserved only ",
                                            pending.reservation.bytes(), " of ",
                                            pending.total_bytes, " bytes"));
  }
  // Sealed before checksumming: a local producer still holding the memfd
  // could otherwise change bytes after they were summed.
  if (!on_device) TENSORD_RETURN_IF_ERROR(pending.buffer->Seal());
  uint32_t crc = 0;
  if (pending.crc32c.has_value()) {
    crc = *pending.crc32c;
  } else if (on_device) {
    TENSORD_ASSIGN_OR_RETURN(crc, DeviceCrc32c(pending));
  } else {
    crc = Crc32c(pending.buffer->data(), pending.buffer->size());
  }
  if (expected_crc32c.has_value() && *expected_crc32c != crc) {
    return absl::DataLossError(absl::StrCat("crc32c of the bytes of '", pending.name, "' is ", crc,
                                            " but the producer declared ", *expected_crc32c));
  }
  if (!on_device) MoveIntoArena(pending);

  auto version = std::make_shared<TensorVersion>();
  version->name = std::move(pending.name);
  version->layout = std::move(pending.layout);
  version->total_bytes = pending.total_bytes;
  version->crc32c = crc;
  version->created = pending.created_at.value_or(absl::Now());
  version->retention = pending.retention;
  version->buffer = std::move(pending.buffer);
  version->device_memory = std::move(pending.device_memory);
  version->reservation = std::move(pending.reservation);
  version->origin.store(pending.origin, std::memory_order_relaxed);
  version->last_used.store(access_tick_.fetch_add(1, std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
  return version;
}

std::shared_ptr<const TensorVersion> Registry::InstallLocked(
    std::shared_ptr<TensorVersion> version) {
  if (version->retention == Retention::kCache) ++cache_versions_;
  auto it = latest_.find(version->name);
  if (it == latest_.end()) {
    const std::string& name = version->name;
    latest_.emplace(name, std::move(version));
    return nullptr;
  }
  if (it->second->retention == Retention::kCache) --cache_versions_;
  std::shared_ptr<const TensorVersion> displaced = std::exchange(it->second, std::move(version));
  RetireLocked(displaced);
  return displaced;
}

std::vector<std::shared_ptr<const TensorVersion>> Registry::EvictAfterPublishLocked(
    absl::string_view keep, std::span<const std::shared_ptr<const TensorVersion>> displaced) {
  // A displaced host version is freed after unlocking; without a reader
  // (none can appear: leases are made under this lock) its bytes are as
  // good as free and must not make cache versions go.
  uint64_t freeing_bytes = 0;
  for (const auto& old : displaced) {
    if (old != nullptr && old.use_count() == 1 && old->device_memory == nullptr) {
      freeing_bytes += old->reservation.bytes();
    }
  }
  const uint64_t used = host_bytes_used();
  if (cache_versions_ == 0 ||
      used - std::min(used, freeing_bytes) <= WatermarkBytes(options_.eviction_high_watermark)) {
    return {};
  }
  // Down to the low watermark if evicting can at least get below the high
  // one; never the version just published (its put is answered OK).
  return EvictLocked(WatermarkBytes(options_.eviction_low_watermark),
                     WatermarkBytes(options_.eviction_high_watermark), keep, freeing_bytes);
}

bool Registry::OvertakenLocked(const TensorVersion& version) const {
  const int64_t origin = version.origin.load(std::memory_order_relaxed);
  if (origin == 0) return false;
  auto it = latest_.find(version.name);
  if (it == latest_.end()) return false;
  const TensorVersion& held = *it->second;
  const int64_t current = held.origin.load(std::memory_order_relaxed);
  if (current == 0 || current < origin) return false;
  // A durable copy of the very version replaces a cache copy of it (a
  // replica asked of a node that had read the version).
  return current > origin || held.retention != Retention::kCache ||
         version.retention == Retention::kCache;
}

absl::StatusOr<SealedVersion> Registry::Seal(PendingVersion pending,
                                             std::optional<uint32_t> expected_crc32c) {
  SealedVersion sealed;
  sealed.restored_version_ = pending.restored_version;
  sealed.only_if_latest_ = pending.only_if_latest;
  TENSORD_ASSIGN_OR_RETURN(sealed.version_, SealBytes(pending, expected_crc32c));
  return sealed;
}

absl::StatusOr<VersionInfo> Registry::Publish(PendingVersion pending,
                                              std::optional<uint32_t> expected_crc32c) {
  TENSORD_ASSIGN_OR_RETURN(SealedVersion sealed, Seal(std::move(pending), expected_crc32c));
  return Install(std::move(sealed));
}

absl::StatusOr<VersionInfo> Registry::Install(SealedVersion sealed, int64_t origin) {
  std::shared_ptr<TensorVersion> version = std::move(sealed.version_);
  if (version == nullptr) return absl::InternalError("install of a version sealed twice or moved");
  if (origin != 0) version->origin.store(origin, std::memory_order_relaxed);
  const uint64_t restored_version = sealed.restored_version_;
  const std::optional<uint64_t> only_if_latest = sealed.only_if_latest_;
  VersionInfo info;
  std::vector<std::shared_ptr<const TensorVersion>> evicted;
  // Freed after the lock is dropped: unmapping and truncating a large memfd
  // takes milliseconds that every other call would otherwise wait out.
  std::shared_ptr<const TensorVersion> displaced;
  {
    MutexLock lock(&mutex_);
    // The size first: a lookup in a million names costs ~20 string compares.
    if (latest_.size() >= options_.max_tensors && !latest_.contains(version->name)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot add tensor '", version->name, "': the registry holds ", latest_.size(),
          " tensors, the limit (--max-tensors) is ", options_.max_tensors));
    }
    if (only_if_latest.has_value()) {
      auto it = latest_.find(version->name);
      const uint64_t current = it == latest_.end() ? 0 : it->second->version;
      if (current != *only_if_latest) {
        return absl::AbortedError(absl::StrCat("'", version->name, "' is at version ", current,
                                               " now, not ", *only_if_latest, "; not published"));
      }
    }
    if (restored_version != 0) {
      // The items of an atomic group share a version, so a restore may
      // repeat the last one. The group itself is not formed again: the
      // snapshot may hold only some of its items (others replaced, cached
      // or on a device), and a part must never pass for the whole.
      const bool shares_version = restored_version == last_version_ && last_was_restored_;
      if (restored_version < last_version_ ||
          (restored_version == last_version_ && !shares_version)) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot restore version ", restored_version, " of '", version->name,
                         "': version ", last_version_, " was already published"));
      }
      last_version_ = restored_version;
      last_was_restored_ = true;
    } else {
      ++last_version_;
      last_was_restored_ = false;
    }
    version->version = last_version_;
    info = InfoOf(*version);
    if (OvertakenLocked(*version)) {
      // Its number is spent (never issued again); its bytes go with `version`.
      info.superseded = true;
      return info;
    }
    // Pushed, not listed in braces: an initializer list would copy `info` twice.
    ChangeEvent published;
    published.kind = ChangeEvent::Kind::kPublished;
    published.version = last_version_;
    published.items.push_back(info);
    changes_.Append(std::move(published));
    displaced = InstallLocked(std::move(version));
    evicted = EvictAfterPublishLocked(info.name, std::span(&displaced, 1));
  }
  LogEvicted(evicted);
  // `evicted` and `displaced` free their bytes here, outside the lock.
  return info;
}

absl::StatusOr<std::vector<SealedVersion>> Registry::SealGroup(
    std::vector<PendingVersion> group, std::span<const std::optional<uint32_t>> expected_crc32c) {
  if (group.empty()) return absl::InvalidArgumentError("an atomic group needs at least one item");
  if (!expected_crc32c.empty() && expected_crc32c.size() != group.size()) {
    return absl::InternalError(absl::StrCat("atomic group of ", group.size(), " items with ",
                                            expected_crc32c.size(), " expected checksums"));
  }
  const uint64_t restored_version = group.front().restored_version;
  std::vector<std::string> names;
  names.reserve(group.size());
  for (const PendingVersion& pending : group) {
    if (pending.restored_version != restored_version) {
      return absl::InvalidArgumentError(
          absl::StrCat("restored group items have versions ", restored_version, " and ",
                       pending.restored_version, "; a group has one version"));
    }
    names.push_back(pending.name);
  }
  std::sort(names.begin(), names.end());
  if (auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", *twice, "' appears twice in one atomic group"));
  }
  std::vector<SealedVersion> sealed;
  sealed.reserve(group.size());
  for (size_t i = 0; i < group.size(); ++i) {
    const std::string name = group[i].name;
    absl::StatusOr<SealedVersion> item =
        Seal(std::move(group[i]), expected_crc32c.empty() ? std::nullopt : expected_crc32c[i]);
    if (!item.ok()) {
      return absl::Status(item.status().code(), absl::StrCat("atomic group not published: item '",
                                                             name, "': ", item.status().message()));
    }
    sealed.push_back(*std::move(item));
  }
  return sealed;
}

absl::StatusOr<std::vector<VersionInfo>> Registry::PublishGroup(
    std::vector<PendingVersion> group, std::span<const std::optional<uint32_t>> expected_crc32c) {
  TENSORD_ASSIGN_OR_RETURN(std::vector<SealedVersion> sealed,
                           SealGroup(std::move(group), expected_crc32c));
  return InstallGroup(std::move(sealed));
}

absl::StatusOr<std::vector<VersionInfo>> Registry::InstallGroup(std::vector<SealedVersion> group,
                                                                int64_t origin) {
  if (group.empty()) return absl::InvalidArgumentError("an atomic group needs at least one item");
  const uint64_t restored_version = group.front().restored_version_;
  std::vector<std::shared_ptr<TensorVersion>> versions;
  std::vector<std::string> names;
  versions.reserve(group.size());
  for (SealedVersion& item : group) {
    if (item.version_ == nullptr) return absl::InternalError("install of a moved group item");
    if (origin != 0) item.version_->origin.store(origin, std::memory_order_relaxed);
    names.push_back(item.version_->name);
    versions.push_back(std::move(item.version_));
  }
  std::sort(names.begin(), names.end());
  std::vector<VersionInfo> infos;
  infos.reserve(versions.size());
  std::vector<std::shared_ptr<const TensorVersion>> evicted;
  std::vector<std::shared_ptr<const TensorVersion>> displaced;
  displaced.reserve(versions.size());
  {
    MutexLock lock(&mutex_);
    size_t new_names = 0;
    for (const auto& version : versions) new_names += latest_.contains(version->name) ? 0 : 1;
    if (latest_.size() + new_names > options_.max_tensors) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot publish an atomic group adding ", new_names, " tensors: the registry holds ",
          latest_.size(), ", the limit (--max-tensors) is ", options_.max_tensors));
    }
    if (restored_version != 0 && restored_version <= last_version_) {
      return absl::FailedPreconditionError(absl::StrCat("cannot restore group version ",
                                                        restored_version, ": version ",
                                                        last_version_, " was already published"));
    }
    last_version_ = restored_version != 0 ? restored_version : last_version_ + 1;
    last_was_restored_ = false;
    // A group is one version: overtaken as a whole when any item is (a
    // newer version of one of its names was installed first), so a reader
    // never sees part of it.
    const bool overtaken = std::any_of(versions.begin(), versions.end(),
                                       [this](const auto& version) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                         return OvertakenLocked(*version);
                                       });
    for (const auto& version : versions) {
      version->version = last_version_;
      infos.push_back(InfoOf(*version));
      infos.back().superseded = overtaken;
    }
    if (overtaken) return infos;
    for (const auto& version : versions) displaced.push_back(InstallLocked(version));
    changes_.Append(ChangeEvent{.kind = ChangeEvent::Kind::kPublished,
                                .version = last_version_,
                                .items = {infos.begin(), infos.end()},
                                .atomic_group = true});
    PruneGroupsLocked();
    groups_.emplace(last_version_, std::move(names));
    // `versions` still references every item, so eviction (which takes only
    // versions nobody else references) cannot take one just published.
    evicted = EvictAfterPublishLocked({}, displaced);
  }
  LogEvicted(evicted);
  return infos;
}

absl::Status Registry::SetOrigin(absl::string_view name, uint64_t version, int64_t origin) {
  MutexLock lock(&mutex_);
  auto it = latest_.find(name);
  if (it == latest_.end() || it->second->version != version) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", name, "' v", version, " is no longer the latest here"));
  }
  int64_t expected = 0;
  if (!it->second->origin.compare_exchange_strong(expected, origin)) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", name, "' v", version, " is already ordered (origin ", expected, ")"));
  }
  return absl::OkStatus();
}

void Registry::PruneGroupsLocked() {
  if (groups_.size() < 64 || groups_.size() < 2 * groups_after_prune_) return;
  // A group missing any item can never be whole again.
  absl::erase_if(groups_, [this](const auto& entry) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const std::string& name : entry.second) {
      if (FindLocked(name, entry.first) == nullptr) return true;
    }
    return false;
  });
  groups_after_prune_ = groups_.size();
}

absl::StatusOr<uint32_t> Registry::DeviceCrc32c(const PendingVersion& pending) const {
  if (pending.device_memory == nullptr) return Crc32c(nullptr, 0);
  // Rare (writers checksum on the way in): one bounded staging buffer.
  constexpr uint64_t kStagingBytes = uint64_t{4} << 20;
  std::vector<uint8_t> staging(std::min(kStagingBytes, pending.total_bytes));
  uint32_t crc = 0;
  for (uint64_t offset = 0; offset < pending.total_bytes; offset += staging.size()) {
    const uint64_t size = std::min<uint64_t>(staging.size(), pending.total_bytes - offset);
    TENSORD_RETURN_IF_ERROR(options_.device_backend->CopyDeviceToHost(
        staging.data(), *pending.device_memory, offset, size, nullptr));
    crc = Crc32cExtend(crc, staging.data(), size);
  }
  return crc;
}

uint64_t Registry::WatermarkBytes(double fraction) const {
  const double limit = static_cast<double>(host_capacity_->limit_bytes());
  if (!(fraction < 1.0)) return host_capacity_->limit_bytes();
  if (!(fraction > 0.0)) return 0;
  return static_cast<uint64_t>(limit * fraction);
}

std::vector<std::shared_ptr<const TensorVersion>> Registry::EvictLocked(uint64_t target_used,
                                                                        uint64_t required_used,
                                                                        absl::string_view keep,
                                                                        uint64_t freeing_bytes) {
  std::vector<std::shared_ptr<const TensorVersion>> evicted;
  uint64_t used = host_bytes_used();
  used -= std::min(used, freeing_bytes);
  // The scan below is O(names); skip it when no cache version exists.
  if (used <= target_used || cache_versions_ == 0) return evicted;
  // Leases are only made under mutex_ (FindLocked), so a version only the
  // registry references (use_count 1) has no reader and cannot gain one now.
  std::vector<std::pair<uint64_t, std::string_view>> candidates;
  uint64_t evictable_bytes = 0;
  for (const auto& [name, version] : latest_) {
    if (version->retention == Retention::kCache && version.use_count() == 1 && name != keep) {
      candidates.emplace_back(version->last_used.load(std::memory_order_relaxed), name);
      evictable_bytes += version->reservation.bytes();
    }
  }
  if (used - std::min(used, evictable_bytes) > required_used) return evicted;
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::string> names;
  for (const auto& [tick, name] : candidates) {
    if (used <= target_used) break;
    const uint64_t bytes = latest_.find(name)->second->reservation.bytes();
    used = used > bytes ? used - bytes : 0;
    names.emplace_back(name);
  }
  ChangeEvent change;
  change.kind = ChangeEvent::Kind::kEvicted;
  for (const std::string& name : names) {
    auto it = latest_.find(name);
    change.items.push_back(InfoOf(*it->second));
    evicted_bytes_.fetch_add(it->second->reservation.bytes(), std::memory_order_relaxed);
    evicted.push_back(std::move(it->second));
    latest_.erase(it);
    --cache_versions_;
  }
  evictions_.fetch_add(evicted.size(), std::memory_order_relaxed);
  if (!change.items.empty()) {
    change.version = ++last_version_;
    last_was_restored_ = false;
    changes_.Append(std::move(change));
  }
  return evicted;
}

void Registry::EvictTo(uint64_t target_used) {
  std::vector<std::shared_ptr<const TensorVersion>> evicted;
  {
    MutexLock lock(&mutex_);
    evicted = EvictLocked(target_used, target_used);
  }
  LogEvicted(evicted);
}

std::vector<Lease> Registry::AcquireDurable() const {
  std::vector<Lease> leases;
  ReaderMutexLock lock(&mutex_);
  leases.reserve(latest_.size());
  for (const auto& [name, version] : latest_) {
    if (IsDurable(version->retention) && !IsDeviceLayout(version->layout)) {
      leases.emplace_back(version);
    }
  }
  return leases;
}

uint64_t Registry::next_version() const {
  ReaderMutexLock lock(&mutex_);
  return last_version_ + 1;
}

void Registry::AdvanceNextVersion(uint64_t next_version) {
  MutexLock lock(&mutex_);
  if (next_version > 0) last_version_ = std::max(last_version_, next_version - 1);
  // The restored versions are no changes a watcher saw; a position from
  // before the restart is behind all of them.
  changes_.RestartHistoryAt(last_version_);
}

void Registry::RetireLocked(const std::shared_ptr<const TensorVersion>& version) {
  // Only readers can keep a retired version alive (beyond the caller's
  // reference); when none does, it goes when the caller drops it.
  if (version.use_count() > 1)
    retired_.emplace(std::pair(version->version, version->name), version);
  // Prune entries whose readers are gone, amortised over retirements.
  if (retired_.size() > 64 && retired_.size() >= 2 * retired_after_prune_) {
    absl::erase_if(retired_, [](const auto& entry) { return entry.second.expired(); });
    retired_after_prune_ = retired_.size();
  }
}

std::shared_ptr<const TensorVersion> Registry::FindLocked(absl::string_view name,
                                                          uint64_t version) const {
  auto it = latest_.find(name);
  if (it != latest_.end() && (version == 0 || it->second->version == version)) return it->second;
  if (version == 0) return nullptr;
  auto retired = retired_.find(std::pair(version, std::string(name)));
  if (retired == retired_.end()) return nullptr;
  return retired->second.lock();
}

absl::Status Registry::MissLocked(absl::string_view name, uint64_t version) const {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return NotFoundLocked(name, version);
}

absl::StatusOr<Lease> Registry::Acquire(absl::string_view name, uint64_t version) const {
  if (name.size() > kMaxTensorNameBytes) return ValidateTensorName(name);
  ReaderMutexLock lock(&mutex_);
  std::shared_ptr<const TensorVersion> found = FindLocked(name, version);
  if (found == nullptr) return MissLocked(name, version);
  found->last_used.store(access_tick_.fetch_add(1, std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  return Lease(std::move(found));
}

std::vector<absl::StatusOr<Lease>> Registry::AcquireMany(
    std::span<const NameVersionView> items) const {
  std::vector<absl::StatusOr<Lease>> leases;
  leases.reserve(items.size());
  ReaderMutexLock lock(&mutex_);
  for (const NameVersionView& item : items) {
    if (item.name.size() > kMaxTensorNameBytes) {
      leases.emplace_back(ValidateTensorName(item.name));
      continue;
    }
    std::shared_ptr<const TensorVersion> found = FindLocked(item.name, item.version);
    if (found == nullptr) {
      leases.emplace_back(MissLocked(item.name, item.version));
      continue;
    }
    found->last_used.store(access_tick_.fetch_add(1, std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
    leases.emplace_back(Lease(std::move(found)));
  }
  return leases;
}

absl::StatusOr<std::vector<Lease>> Registry::AcquirePrefix(absl::string_view prefix,
                                                           size_t max_items) const {
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  std::vector<Lease> leases;
  ReaderMutexLock lock(&mutex_);
  for (auto it = latest_.lower_bound(prefix);
       it != latest_.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (leases.size() == max_items) {
      return absl::OutOfRangeError(absl::StrCat(
          "more than ", max_items, " tensors start with '", prefix,
          "', the most one batch holds; fetch them by name in batches (List pages them)"));
    }
    it->second->last_used.store(access_tick_.fetch_add(1, std::memory_order_relaxed) + 1,
                                std::memory_order_relaxed);
    leases.emplace_back(it->second);
  }
  return leases;
}

absl::StatusOr<std::vector<Lease>> Registry::AcquireGroup(uint64_t group_version) const {
  ReaderMutexLock lock(&mutex_);
  auto group = groups_.find(group_version);
  if (group == groups_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "no atomic group was published as version ", group_version,
        " since this server started (a restart restores a group's items, not the group)"));
  }
  std::vector<Lease> leases;
  leases.reserve(group->second.size());
  for (const std::string& name : group->second) {
    std::shared_ptr<const TensorVersion> found = FindLocked(name, group_version);
    if (found == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("atomic group version ", group_version, " is no longer whole: its tensor '",
                       name, "' was replaced, deleted or evicted and no reader holds it"));
    }
    found->last_used.store(access_tick_.fetch_add(1, std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
    leases.emplace_back(std::move(found));
  }
  return leases;
}

absl::StatusOr<VersionInfo> Registry::Stat(absl::string_view name, uint64_t version) const {
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<const TensorVersion> found, Find(name, version));
  return InfoOf(*found);
}

absl::StatusOr<std::shared_ptr<const TensorVersion>> Registry::Find(absl::string_view name,
                                                                    uint64_t version) const {
  if (name.size() > kMaxTensorNameBytes) return ValidateTensorName(name);
  ReaderMutexLock lock(&mutex_);
  std::shared_ptr<const TensorVersion> found = FindLocked(name, version);
  if (found == nullptr) return MissLocked(name, version);
  return found;
}

uint64_t Registry::LatestVersionOf(absl::string_view name) const {
  ReaderMutexLock lock(&mutex_);
  auto it = latest_.find(name);
  return it == latest_.end() ? 0 : it->second->version;
}

absl::StatusOr<ListPage> Registry::List(absl::string_view prefix, uint32_t page_size,
                                        absl::string_view page_token) const {
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  if (page_size > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", page_size, " exceeds the limit of ", kMaxPageSize));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  std::string after;
  if (!page_token.empty()) {
    TENSORD_ASSIGN_OR_RETURN(after, DecodePageToken(page_token));
  }
  ListPage page;
  ReaderMutexLock lock(&mutex_);
  // Resume after the token's name, but never before the prefix range.
  auto it = (!after.empty() && after >= prefix) ? latest_.upper_bound(after)
                                                : latest_.lower_bound(prefix);
  for (; it != latest_.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (page.tensors.size() == page_size) {
      page.next_page_token = EncodePageToken(page.tensors.back().name);
      break;
    }
    page.tensors.push_back(InfoOf(*it->second));
  }
  return page;
}

absl::StatusOr<uint64_t> Registry::Delete(absl::string_view name, uint64_t expected_version) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  // Declared before the lock so that its bytes are freed after it is dropped.
  std::shared_ptr<const TensorVersion> removed;
  MutexLock lock(&mutex_);
  auto it = latest_.find(name);
  if (it == latest_.end())
    return absl::NotFoundError(absl::StrCat("tensor '", name, "' not found"));
  uint64_t latest = it->second->version;
  if (expected_version != 0 && expected_version != latest) {
    return absl::FailedPreconditionError(absl::StrCat("tensor '", name, "' is at version ", latest,
                                                      ", not the expected version ",
                                                      expected_version));
  }
  removed = std::move(it->second);
  latest_.erase(it);
  if (removed->retention == Retention::kCache) --cache_versions_;
  RetireLocked(removed);
  ChangeEvent deleted;
  deleted.kind = ChangeEvent::Kind::kDeleted;
  deleted.version = ++last_version_;
  deleted.items.push_back(InfoOf(*removed));
  changes_.Append(std::move(deleted));
  last_was_restored_ = false;
  return latest;
}

absl::StatusOr<WatchStart> Registry::StartWatch(absl::string_view prefix, bool with_existing,
                                                uint64_t from_version, size_t max_existing) const {
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  WatchStart start;
  ReaderMutexLock lock(&mutex_);
  if (from_version > 0) {
    if (from_version > last_version_) {
      return absl::OutOfRangeError(absl::StrCat("from_version ", from_version,
                                                " is past the last version this server issued (",
                                                last_version_, ")"));
    }
    start.position = from_version;
    return start;
  }
  start.position = last_version_;
  if (!with_existing) return start;
  for (auto it = latest_.lower_bound(prefix);
       it != latest_.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (start.existing.size() == max_existing) {
      return absl::OutOfRangeError(absl::StrCat("more than ", max_existing, " tensors start with '",
                                                prefix,
                                                "', the most a watch sends as existing; watch a "
                                                "narrower prefix"));
    }
    start.existing.push_back(InfoOf(*it->second));
  }
  return start;
}

absl::Status Registry::NotFoundLocked(absl::string_view name, uint64_t version) const {
  if (version == 0) return absl::NotFoundError(absl::StrCat("tensor '", name, "' not found"));
  auto latest = latest_.find(name);
  return absl::NotFoundError(absl::StrCat(
      "version ", version, " of tensor '", name, "' not found",
      latest == latest_.end() ? std::string()
                              : absl::StrCat(" (latest is ", latest->second->version, ")")));
}

RegistryStats Registry::Stats() const {
  RegistryStats stats;
  stats.devices.resize(device_capacity_.size());
  auto counts_of = [&stats](const TensorVersion& version) -> TensorCounts& {
    if (!IsDeviceLayout(version.layout)) return stats;
    return stats.devices.at(version.layout.device.device_id);
  };
  auto count = [&counts_of](const TensorVersion& version) {
    TensorCounts& counts = counts_of(version);
    ++counts.versions;
    counts.stored_bytes += version.total_bytes;
    counts.open_leases += version.open_leases.load(std::memory_order_relaxed);
  };
  ReaderMutexLock lock(&mutex_);
  for (const auto& [name, version] : latest_) {
    ++counts_of(*version).tensors;
    count(*version);
  }
  for (const auto& [key, weak] : retired_) {
    if (std::shared_ptr<const TensorVersion> version = weak.lock()) count(*version);
  }
  stats.arenas = arenas_.Stats();
  stats.spare_buffers = spares_->Stats();
  return stats;
}

size_t Registry::tensor_count() const {
  ReaderMutexLock lock(&mutex_);
  return latest_.size();
}

}  // namespace tensord
