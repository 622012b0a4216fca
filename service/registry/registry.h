// Names -> immutable versions. The registry knows nothing of gRPC.
#ifndef TENSORD_SERVICE_REGISTRY_REGISTRY_H_
#define TENSORD_SERVICE_REGISTRY_REGISTRY_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/mutex.h"
#include "service/memory/arena_pool.h"
#include "service/memory/host_buffer.h"
#include "service/registry/capacity.h"
#include "service/registry/change_feed.h"
#include "service/registry/latest_by_name.h"
#include "service/registry/spare_buffers.h"
#include "service/registry/tensor_version.h"
#include "service/registry/version_info.h"
#include "service/registry/watch_source.h"

namespace tensord {

struct RegistryOptions {
  // Bytes all live host versions may hold together (--max-host-bytes).
  uint64_t max_host_bytes = uint64_t{8} << 30;
  // Most names the registry holds at once.
  uint64_t max_tensors = 1'000'000;
  // Page size of new host buffers (--huge-pages).
  PagePolicy page_policy = PagePolicy::kNormal;
  // Fractions of max_host_bytes: once a publish leaves more than the high
  // watermark in use, unleased kCache versions are evicted, least recently
  // used first, until at most the low watermark is (--eviction-*-watermark).
  double eviction_high_watermark = 0.9;
  double eviction_low_watermark = 0.8;
  // Holds kDLCUDA versions; null means this server keeps host tensors only
  // (device puts are FAILED_PRECONDITION). Outlives nothing it allocated:
  // allocations keep working after the backend object is gone.
  std::shared_ptr<DeviceBackend> device_backend;
  // Bytes the live versions on each device may hold (--max-device-bytes).
  uint64_t max_device_bytes = uint64_t{8} << 30;
  // Small host versions share arenas (--arena-max-tensor-bytes).
  ArenaPoolOptions arenas;
  // Memfds of large remote-put versions that are gone, kept for the next
  // put of the same size (--spare-put-bytes); off while max_bytes is 0.
  SpareBufferOptions spare_buffers;
  // Items of recent changes kept for watchers (--watch-history): a watcher
  // further behind than this is told what it missed.
  size_t watch_history_items = 65536;
  // The access domain of a name: versions share an arena only when their
  // names' domains are equal, since a reader handed one slot can map the
  // whole arena. Null: one domain for every name.
  std::function<std::string(absl::string_view name)> arena_domain;
};

// Where Prepare puts a host version's bytes.
enum class HostPlacement {
  // An arena slot when the version is small enough, else its own memfd.
  kAuto,
  // Its own memfd: what a local create hands to its producer to write, so
  // no writable fd ever reaches bytes that another version shares. Publish
  // moves a small one into an arena slot.
  kOwnMemfd,
};

VersionInfo InfoOf(const TensorVersion& version);

// Counts at one moment, for metrics, of the versions on one device.
struct TensorCounts {
  uint64_t tensors = 0;       // names held
  uint64_t versions = 0;      // latest versions plus older ones readers still hold
  uint64_t stored_bytes = 0;  // bytes of those versions
  uint64_t open_leases = 0;   // leases on those versions
};

// The fields count host versions; `devices[N]` counts those on cuda:N.
struct RegistryStats : TensorCounts {
  std::vector<TensorCounts> devices;
  ArenaStats arenas;
  SpareBufferStats spare_buffers;
};

// One item of a batch read: `version` 0 means the latest.
struct NameVersion {
  std::string name;
  uint64_t version = 0;
};
// The same, naming a string the caller keeps (a request's): what
// AcquireMany reads, so a batch's names are not copied to be looked up.
struct NameVersionView {
  absl::string_view name;
  uint64_t version = 0;
};

struct ListPage {
  std::vector<VersionInfo> tensors;
  std::string next_page_token;  // empty on the last page
};

// The bytes and metadata of a version being built by a put, before publish.
struct PendingVersion {
  std::string name;
  dlpack::TensorLayout layout;
  uint64_t total_bytes = 0;
  // Host tensors: filled, not yet sealed. Device tensors: null.
  std::unique_ptr<HostBytes> buffer;
  // Device tensors with total_bytes > 0: filled by the writer's copies,
  // which must have completed before Publish.
  std::unique_ptr<DeviceAllocation> device_memory;
  ByteReservation reservation;
  // CRC-32C of the bytes when the writer computed it on the way in (while the
  // bytes were hot in cache); Publish computes it otherwise.
  std::optional<uint32_t> crc32c;
  Retention retention = Retention::kDefault;
  // Set only when restoring a snapshot: the version number the tensor had,
  // kept so readers see the same versions after a restart.
  uint64_t restored_version = 0;
  // Its creation time when not the moment it is sealed: a restored
  // snapshot's, or what the readers of a copy passed on as it arrived were
  // told (FillingVersion).
  std::optional<absl::Time> created_at;
  // Set: publish only while the name's latest version is this one (0: the
  // name is absent), else ABORTED and nothing is published. (No caller sets
  // it at present: copies between cluster nodes are ordered by `origin`.)
  std::optional<uint64_t> only_if_latest;
  // In a cluster: the order of this version among the name's versions (its
  // name record's origin). A version is installed only over one ordered
  // before it: over an equal or newer one it is numbered and reported
  // superseded, never installed, so a node's copy never goes backwards.
  int64_t origin = 0;
};

// A version whose checks passed and whose bytes are sealed and summed, not
// yet the latest of its name: what a cluster put holds while etcd orders
// it. Move-only; dropping it frees the bytes and the reservation.
class SealedVersion {
 public:
  SealedVersion(SealedVersion&&) = default;
  SealedVersion& operator=(SealedVersion&&) = default;
  const std::string& name() const { return version_->name; }
  uint64_t total_bytes() const { return version_->total_bytes; }
  uint32_t crc32c() const { return version_->crc32c; }
  Retention retention() const { return version_->retention; }
  const dlpack::TensorLayout& layout() const { return version_->layout; }
  // The version itself, for a reader served it before it is installed (a
  // copy passed on as it arrived): still valid once installed, or if it
  // never is (superseded).
  std::shared_ptr<const TensorVersion> Share() const { return version_; }

 private:
  friend class Registry;
  SealedVersion() = default;
  std::shared_ptr<TensorVersion> version_;
  uint64_t restored_version_ = 0;
  std::optional<uint64_t> only_if_latest_;
};

// Thread-safe. Publishing swaps one pointer under the lock; readers holding a
// Lease never wait for writers and never see a half-written tensor.
class Registry final : public WatchSource {
 public:
  explicit Registry(const RegistryOptions& options);

  // Reserves capacity for a new version of `total_bytes` and allocates its
  // writable buffer, before any byte arrives: an arena slot when the
  // version is small and `placement` allows, else a memfd of its own, new
  // and zeroed or, for kAuto, a gone version's spare memfd holding its
  // bytes still: the caller must write every byte before Publish.
  // RESOURCE_EXHAUSTED
  // when it does not fit even after evicting unleased kCache versions. The
  // caller fills the buffer, then Publish()es.
  // A kDLCUDA layout reserves against that device's budget and allocates on
  // the device backend instead: FAILED_PRECONDITION without a backend,
  // INVALID_ARGUMENT for a device id the backend lacks or for kCache
  // retention (device versions are never evicted), RESOURCE_EXHAUSTED
  // naming the device when it is full.
  absl::StatusOr<PendingVersion> Prepare(std::string name, dlpack::TensorLayout layout,
                                         uint64_t total_bytes,
                                         Retention retention = Retention::kDefault,
                                         HostPlacement placement = HostPlacement::kAuto);

  // Validates the layout against the bytes, computes the CRC-32C (checking it
  // against `expected_crc32c` when given: DATA_LOSS on mismatch), seals the
  // buffer and makes it the latest version of its name. Nothing is published
  // on error. RESOURCE_EXHAUSTED when the name is new and max_tensors is hit.
  // A restored version (pending.restored_version) keeps its number, which
  // must exceed every version published so far (FAILED_PRECONDITION), or
  // equal the previous restored one (the items of an atomic group; the
  // group itself is not formed again, as the snapshot may hold only part
  // of it).
  absl::StatusOr<VersionInfo> Publish(PendingVersion pending,
                                      std::optional<uint32_t> expected_crc32c = std::nullopt);

  // Publish in two steps, for a cluster that must order the version (with
  // its checksum) before it becomes the latest: Seal runs Publish's checks,
  // seals and sums the bytes; Install makes the version the latest, with
  // `origin` (0: pending.origin's).
  absl::StatusOr<SealedVersion> Seal(PendingVersion pending,
                                     std::optional<uint32_t> expected_crc32c = std::nullopt);
  absl::StatusOr<VersionInfo> Install(SealedVersion sealed, int64_t origin = 0);
  // PublishGroup in two steps: every item sealed, then installed under one
  // group version with one origin.
  absl::StatusOr<std::vector<VersionInfo>> InstallGroup(std::vector<SealedVersion> group,
                                                        int64_t origin = 0);
  // The group's checks on names and count, then each item sealed.
  absl::StatusOr<std::vector<SealedVersion>> SealGroup(
      std::vector<PendingVersion> group,
      std::span<const std::optional<uint32_t>> expected_crc32c = {});

  // Gives `version` of `name` (still the latest, origin 0) the cluster order
  // `origin`: a version held before the node joined, now recorded.
  // FAILED_PRECONDITION when it is not the latest or already ordered.
  absl::Status SetOrigin(absl::string_view name, uint64_t version, int64_t origin);

  // Publishes every pending version under one new version number (the
  // group version) in one step, or none of them: readers see all of the
  // group or none of it. The first item that fails Publish's checks fails
  // the group with its status; so does a name given twice
  // (INVALID_ARGUMENT) and a group that would take max_tensors past its
  // limit (RESOURCE_EXHAUSTED). Items restored with one restored_version
  // keep that number.
  // `expected_crc32c`, when not empty, has one entry per item (as Publish's).
  absl::StatusOr<std::vector<VersionInfo>> PublishGroup(
      std::vector<PendingVersion> group,
      std::span<const std::optional<uint32_t>> expected_crc32c = {});

  // A lease on `version` of `name` (0 = latest). NOT_FOUND names what is
  // missing; an older version is found while someone still holds it.
  // Counts as a use for least-recently-used eviction.
  absl::StatusOr<Lease> Acquire(absl::string_view name, uint64_t version) const;

  // A lease on each item, all taken under one lock: a consistent cut, so
  // a reader sees every item of an atomic group from the same publish (or
  // a later one). Each item fails on its own; one that was deleted or
  // evicted since its group was published is missing alone.
  std::vector<absl::StatusOr<Lease>> AcquireMany(std::span<const NameVersionView> items) const;

  // Leases on the latest version of every name starting with `prefix`, in
  // name order, under one lock. OUT_OF_RANGE naming `max_items` when more
  // names match.
  absl::StatusOr<std::vector<Lease>> AcquirePrefix(absl::string_view prefix,
                                                   size_t max_items) const;

  // Leases on every item of the atomic group published as `group_version`,
  // in name order. NOT_FOUND when no such group was published since this
  // server started, or when any of its items is gone (replaced, deleted or
  // evicted, and unleased).
  absl::StatusOr<std::vector<Lease>> AcquireGroup(uint64_t group_version) const;

  absl::StatusOr<VersionInfo> Stat(absl::string_view name, uint64_t version) const;
  // Stat without copying the metadata out: the version itself, held (not
  // leased: its open_leases does not count this hold) while the caller reads it.
  absl::StatusOr<std::shared_ptr<const TensorVersion>> Find(absl::string_view name,
                                                            uint64_t version) const;
  // The latest version number of `name`, or 0 when the registry lacks it:
  // Stat without copying the metadata, for checks on every read.
  uint64_t LatestVersionOf(absl::string_view name) const;

  // Latest versions of names starting with `prefix`, in name order.
  // `page_size` 0 means 100; above 1000 is INVALID_ARGUMENT, as is a
  // page_token this registry did not produce.
  absl::StatusOr<ListPage> List(absl::string_view prefix, uint32_t page_size,
                                absl::string_view page_token) const;

  // Starts a watch of names starting with `prefix`: the position to read
  // changes() after, and, when `with_existing`, the latest version of each
  // matching name as of that position (OUT_OF_RANGE naming `max_existing`
  // when more match). `from_version` > 0 starts there instead (no
  // existing); OUT_OF_RANGE when it is past the last version issued.
  absl::StatusOr<WatchStart> StartWatch(absl::string_view prefix, bool with_existing,
                                        uint64_t from_version, size_t max_existing) const override;

  // Every publish, delete and eviction, in version order.
  const ChangeFeed& changes() const { return changes_; }
  ChangeFeed& changes() override { return changes_; }

  // Removes `name`; when `expected_version` is not 0 it must be the latest
  // (FAILED_PRECONDITION otherwise). Returns the removed version. The
  // delete takes a version number of its own (its position among
  // changes()), which the next publish follows.
  absl::StatusOr<uint64_t> Delete(absl::string_view name, uint64_t expected_version);

  // Leases on the latest version of every durable (non-cache) host name, in
  // name order: what a snapshot writes. The leases keep the bytes while
  // written. Device versions are not snapshotted (yet).
  std::vector<Lease> AcquireDurable() const;

  // The version the next publish gets (the last issued + 1), for snapshots.
  uint64_t next_version() const;
  // Makes the next publish get at least `next_version`, so numbers issued
  // before a restart are not issued again (restore, after the restored
  // versions are published). Never lowers it. Watchers' history restarts
  // there: a position below it is told it may have missed changes.
  void AdvanceNextVersion(uint64_t next_version);

  // Versions evicted so far, and their bytes (for metrics).
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  uint64_t evicted_bytes() const { return evicted_bytes_.load(std::memory_order_relaxed); }

  // Bytes of host versions and of puts in progress; spare memfds hold
  // room in the same budget (Stats().spare_buffers) but are not counted
  // here: they give it back whenever a put needs it.
  uint64_t host_bytes_used() const {
    const uint64_t used = host_capacity_->used_bytes();
    return used - std::min(used, spares_->kept_bytes());
  }
  uint64_t host_bytes_limit() const { return host_capacity_->limit_bytes(); }
  uint64_t max_tensors() const { return options_.max_tensors; }
  // Null when the server holds host tensors only.
  DeviceBackend* device_backend() const { return options_.device_backend.get(); }
  // Devices of the backend (0 without one); bytes are per device.
  int device_count() const { return static_cast<int>(device_capacity_.size()); }
  uint64_t device_bytes_used(int device) const { return device_capacity_.at(device)->used_bytes(); }
  uint64_t device_bytes_limit(int device) const {
    return device_capacity_.at(device)->limit_bytes();
  }
  size_t tensor_count() const;
  // Walks every live version under the read lock: for scrapes, not calls.
  RegistryStats Stats() const;

 private:
  // Finds a live version; caller holds mutex_.
  std::shared_ptr<const TensorVersion> FindLocked(absl::string_view name, uint64_t version) const
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  // NOT_FOUND naming the name and, when given, the version and the latest.
  absl::Status NotFoundLocked(absl::string_view name, uint64_t version) const
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  // The answer for a name FindLocked did not find: INVALID_ARGUMENT when
  // the name breaks a rule, else NotFoundLocked. Readers check a name only
  // when it is not found (after ruling out an overlong one, which is not
  // looked up): every stored name was checked when it was sealed, so a
  // found one is valid, and most lookups find.
  absl::Status MissLocked(absl::string_view name, uint64_t version) const
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  void RetireLocked(const std::shared_ptr<const TensorVersion>& version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Removes unleased kCache versions other than `keep`'s latest, least
  // recently used first, until at most `target_used` bytes are in use. When
  // evicting every candidate would not bring use down to `required_used`
  // (durable or leased bytes dominate), evicts none rather than emptying
  // the cache for no gain. Returns them so the caller frees their bytes
  // after unlocking. `freeing_bytes` are in use but about to be freed by
  // the caller (a replaced version no reader holds): counted as free.
  std::vector<std::shared_ptr<const TensorVersion>> EvictLocked(uint64_t target_used,
                                                                uint64_t required_used,
                                                                absl::string_view keep = {},
                                                                uint64_t freeing_bytes = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Evicts (taking the lock) until at most `target_used` bytes are in use,
  // or nothing when that cannot be reached.
  void EvictTo(uint64_t target_used);
  uint64_t WatermarkBytes(double fraction) const;
  // Reserves `bytes` of host capacity, evicting cache versions to make room.
  absl::StatusOr<ByteReservation> ReserveHost(uint64_t bytes);
  // Publish's work before the lock: checks, seal, checksum, arena move.
  absl::StatusOr<std::shared_ptr<TensorVersion>> SealBytes(PendingVersion& pending,
                                                           std::optional<uint32_t> expected_crc32c);
  // Whether `version` may replace the name's latest: not when both are
  // ordered and the latest is as new or newer.
  bool OvertakenLocked(const TensorVersion& version) const ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  // Makes `version` the latest of its name; returns the version it displaced.
  std::shared_ptr<const TensorVersion> InstallLocked(std::shared_ptr<TensorVersion> version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Evicts cache versions when use passed the high watermark after a publish
  // (never `keep`); `displaced` are about to be freed by the caller.
  std::vector<std::shared_ptr<const TensorVersion>> EvictAfterPublishLocked(
      absl::string_view keep, std::span<const std::shared_ptr<const TensorVersion>> displaced)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Drops group records none of whose items is alive, amortised.
  void PruneGroupsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // RegistryOptions::arena_domain of `name` ("" without one): what arenas
  // and spare memfds are shared within.
  std::string AccessDomain(absl::string_view name) const;
  // Frees spare memfds until `bytes` more would fit in the host budget (or
  // none is left); true when any went, false when nothing was short.
  bool ReleaseSpareRoom(uint64_t bytes);
  // Moves a small sealed version out of its own memfd into an arena slot,
  // so local creates do not hold an fd each; keeps it where it is when
  // there is no room.
  void MoveIntoArena(PendingVersion& pending);
  // CRC-32C of a device version's bytes, copied to the host in pieces.
  absl::StatusOr<uint32_t> DeviceCrc32c(const PendingVersion& pending) const;
  // Prepare for a kDLCUDA layout.
  absl::StatusOr<PendingVersion> PrepareOnDevice(std::string name, dlpack::TensorLayout layout,
                                                 uint64_t total_bytes, Retention retention);

  const RegistryOptions options_;
  const std::shared_ptr<CapacityAccount> host_capacity_;
  ArenaPool arenas_;
  const std::shared_ptr<SpareBuffers> spares_;
  // One budget per device of the backend, indexed by device id.
  std::vector<std::shared_ptr<CapacityAccount>> device_capacity_;
  mutable std::atomic<uint64_t> access_tick_{0};
  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> evicted_bytes_{0};

  mutable Mutex mutex_;
  uint64_t last_version_ ABSL_GUARDED_BY(mutex_) = 0;
  // Ordered, for prefix listing and stable page tokens, and hashed.
  LatestByName<std::shared_ptr<const TensorVersion>> latest_ ABSL_GUARDED_BY(mutex_);
  // Superseded or deleted versions that readers may still hold, by
  // (version, name): an atomic group's items share a version.
  absl::flat_hash_map<std::pair<uint64_t, std::string>, std::weak_ptr<const TensorVersion>> retired_
      ABSL_GUARDED_BY(mutex_);
  // The names of each atomic group, by group version.
  absl::flat_hash_map<uint64_t, std::vector<std::string>> groups_ ABSL_GUARDED_BY(mutex_);
  size_t groups_after_prune_ ABSL_GUARDED_BY(mutex_) = 0;
  // retired_'s size after its last pruning, so pruning stays amortised.
  size_t retired_after_prune_ ABSL_GUARDED_BY(mutex_) = 0;
  // The last version came from a restore: the next restored one may share
  // its number (an atomic group's items).
  bool last_was_restored_ ABSL_GUARDED_BY(mutex_) = false;
  // kCache versions among latest_: eviction scans only when there are some.
  uint64_t cache_versions_ ABSL_GUARDED_BY(mutex_) = 0;
  // Appended under mutex_, so its order is the order of last_version_.
  ChangeFeed changes_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_REGISTRY_H_
