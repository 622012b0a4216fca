#include "service/cluster/cluster_directory.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "etcd/etcd_v3.pb.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

// Names one read of the feed hands the registrar at most.
constexpr size_t kFeedBatch = 512;

std::chrono::milliseconds ToChrono(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

}  // namespace

ClusterDirectory::ClusterDirectory(std::shared_ptr<EtcdClient> etcd, Registry& registry,
                                   DirectoryOptions options, LeaseSource lease)
    : etcd_(std::move(etcd)),
      registry_(registry),
      options_(std::move(options)),
      lease_(std::move(lease)),
      mirror_log_("cluster_directory_unreachable"),
      registrar_log_("cluster_registration_failing") {}

ClusterDirectory::~ClusterDirectory() { Stop(); }

void ClusterDirectory::Start() {
  if (started_.exchange(true)) return;
  subscription_ = registry_.changes().Subscribe([this] {
    std::lock_guard<std::mutex> lock(signal_mu_);
    ++wakes_;
    signal_.notify_all();
  });
  mirror_ = std::thread([this] { MirrorLoop(); });
  registrar_ = std::thread([this] { RegistrarLoop(); });
}

void ClusterDirectory::Stop() {
  {
    std::lock_guard<std::mutex> lock(signal_mu_);
    if (stopping_) return;
    stopping_ = true;
    signal_.notify_all();
  }
  watch_cancel_.Cancel();
  if (mirror_.joinable()) mirror_.join();
  if (registrar_.joinable()) registrar_.join();
  subscription_.reset();
  {
    MutexLock lock(&mu_);
    stopped_ = true;
  }
  RunDueWaiters(/*stopping=*/true);
}

int64_t ClusterDirectory::MaxOtherOrigin(const NameEntry& entry, absl::string_view self,
                                         int64_t deleted_at) {
  int64_t origin = 0;
  for (const auto& [node, record] : entry.holders) {
    if (node != self && record.origin > deleted_at) origin = std::max(origin, record.origin);
  }
  return origin;
}

int64_t ClusterDirectory::DeletedAtLocked(absl::string_view name) const {
  auto it = tombstones_.find(name);
  return it == tombstones_.end() ? 0 : it->second;
}

bool ClusterDirectory::HoldsLatest(absl::string_view name) const {
  const uint64_t held = registry_.LatestVersionOf(name);
  ReaderMutexLock lock(&mu_);
  auto entry = names_.find(name);
  if (entry == names_.end()) return true;
  const int64_t other = MaxOtherOrigin(entry->second, options_.node_name, DeletedAtLocked(name));
  if (other == 0) return true;
  if (held == 0) return false;
  if (auto local = local_.find(std::string(name)); local != local_.end() && local->second.version == held) {
    return local->second.origin >= other;
  }
  if (auto replica = replicas_.find(std::pair(std::string(name), held)); replica != replicas_.end()) {
    return replica->second.origin >= other;
  }
  // A local publish the registrar has not written yet: newer than anything
  // registered before it.
  return true;
}

int64_t ClusterDirectory::OriginOf(absl::string_view name, uint64_t version) const {
  ReaderMutexLock lock(&mu_);
  if (auto local = local_.find(std::string(name)); local != local_.end() && local->second.version == version) {
    return local->second.origin;
  }
  if (auto replica = replicas_.find(std::pair(std::string(name), version)); replica != replicas_.end()) {
    return replica->second.origin;
  }
  return INT64_MAX;
}

absl::StatusOr<HolderRecord> ClusterDirectory::HolderOf(absl::string_view name,
                                                        absl::string_view node) {
  {
    ReaderMutexLock lock(&mu_);
    if (auto entry = names_.find(name); entry != names_.end()) {
      if (auto holder = entry->second.holders.find(std::string(node));
          holder != entry->second.holders.end()) {
        return holder->second;
      }
    }
  }
  TENSORD_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv,
                           etcd_->Get(HolderKey(options_.prefix, name, node)));
  if (!kv.has_value()) {
    return absl::NotFoundError(absl::StrCat("the cluster directory lists no copy of '", name,
                                            "' on node ", node));
  }
  return DecodeHolder(options_.prefix, *kv);
}

absl::StatusOr<NameLocation> ClusterDirectory::Locate(absl::string_view name) {
  // Copies older than the name's delete are not versions of it any more.
  auto locate = [&](const std::map<std::string, HolderRecord>& holders, int64_t deleted_at) {
    NameLocation location;
    for (const auto& [node, record] : holders) {
      if (node != options_.node_name && record.origin > deleted_at) {
        location.origin = std::max(location.origin, record.origin);
      }
    }
    for (const auto& [node, record] : holders) {
      if (node != options_.node_name && record.origin == location.origin && location.origin != 0) {
        location.holders.push_back(record);
      }
    }
    std::stable_partition(location.holders.begin(), location.holders.end(),
                          [](const HolderRecord& r) { return !r.replica; });
    return location;
  };
  {
    ReaderMutexLock lock(&mu_);
    if (auto entry = names_.find(name); entry != names_.end()) {
      NameLocation location = locate(entry->second.holders, DeletedAtLocked(name));
      if (location.origin != 0) return location;
    }
  }
  TENSORD_ASSIGN_OR_RETURN(EtcdRangeResult range,
                           etcd_->RangePrefix(HolderKeysOf(options_.prefix, name)));
  TENSORD_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> tombstone,
                           etcd_->Get(TombstoneKey(options_.prefix, name)));
  const int64_t deleted_at = tombstone.has_value() ? tombstone->mod_revision : 0;
  std::map<std::string, HolderRecord> holders;
  for (const EtcdKeyValue& kv : range.values) {
    absl::StatusOr<HolderRecord> record = DecodeHolder(options_.prefix, kv);
    if (!record.ok()) {
      Log(LogLevel::kWarning, "directory_entry_skipped", {{"error", record.status().ToString()}});
      continue;
    }
    if (record->name == name) holders[record->node] = *std::move(record);
  }
  return locate(holders, deleted_at);
}

absl::StatusOr<VersionInfo> ClusterDirectory::PublishReplica(PendingVersion pending,
                                                             uint32_t crc32c,
                                                             const HolderRecord& source) {
  // Held from before the publish until its origin is recorded, so the
  // registrar (which takes it before reading origins) never registers the
  // copy as an original.
  std::lock_guard<std::mutex> publishing(replica_publish_mu_);
  {
    ReaderMutexLock lock(&mu_);
    if (const int64_t deleted_at = DeletedAtLocked(source.name); source.origin <= deleted_at) {
      return absl::NotFoundError(absl::StrCat("tensor '", source.name, "' was deleted (revision ",
                                              deleted_at, ") after the version pulled"));
    }
  }
  TENSORD_ASSIGN_OR_RETURN(VersionInfo info, registry_.Publish(std::move(pending), crc32c));
  MutexLock lock(&mu_);
  replicas_[std::pair(info.name, info.version)] = source;
  return info;
}

absl::Status ClusterDirectory::PropagateDelete(absl::string_view name) {
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> lock(tombstone_mu_);
    if (tombstone_lease_ == 0 || absl::Now() + options_.tombstone_ttl / 2 > tombstone_lease_until_) {
      TENSORD_ASSIGN_OR_RETURN(EtcdLease granted, etcd_->GrantLease(options_.tombstone_ttl));
      tombstone_lease_ = granted.id;
      tombstone_lease_until_ = absl::Now() + granted.ttl;
    }
    lease = tombstone_lease_;
  }
  etcdserverpb::TxnRequest txn;
  etcdserverpb::DeleteRangeRequest* holders = txn.add_success()->mutable_request_delete_range();
  const std::string keys = HolderKeysOf(options_.prefix, name);
  holders->set_key(keys);
  holders->set_range_end(EtcdClient::PrefixRangeEnd(keys));
  etcdserverpb::PutRequest* tombstone = txn.add_success()->mutable_request_put();
  tombstone->set_key(TombstoneKey(options_.prefix, name));
  tombstone->set_value(nlohmann::json{{"node", options_.node_name}}.dump());
  tombstone->set_lease(lease);
  absl::StatusOr<etcdserverpb::TxnResponse> done = etcd_->Txn(txn);
  if (!done.ok()) {
    // The tombstone lease may have been lost with etcd: take a new one next time.
    std::lock_guard<std::mutex> lock(tombstone_mu_);
    tombstone_lease_ = 0;
    return done.status();
  }
  return absl::OkStatus();
}

void ClusterDirectory::AfterRegistered(uint64_t position, absl::Duration timeout, Done done) {
  absl::Status now;
  {
    MutexLock lock(&mu_);
    if (stopped_) {
      now = absl::UnavailableError("the node is leaving the cluster");
    } else if (registered_position_ >= position) {
      now = absl::OkStatus();
    } else if (!registrar_status_.ok()) {
      now = absl::UnavailableError(absl::StrCat("the cluster directory cannot be written now: ",
                                                registrar_status_.message()));
    } else {
      waiters_.push_back(RegisteredWaiter{position, absl::Now() + timeout, std::move(done)});
      return;
    }
  }
  std::move(done)(now);
}

void ClusterDirectory::RunDueWaiters(bool stopping) {
  std::vector<std::pair<Done, absl::Status>> due;
  {
    MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      absl::Status status;
      if (registered_position_ >= it->position) {
        status = absl::OkStatus();
      } else if (stopping) {
        status = absl::UnavailableError("the node is leaving the cluster");
      } else if (!registrar_status_.ok()) {
        status = absl::UnavailableError(absl::StrCat("the cluster directory cannot be written now: ",
                                                     registrar_status_.message()));
      } else if (now >= it->deadline) {
        status = absl::DeadlineExceededError("the cluster directory did not register it in time");
      } else {
        ++it;
        continue;
      }
      due.emplace_back(std::move(it->done), std::move(status));
      it = waiters_.erase(it);
    }
  }
  for (auto& [done, status] : due) std::move(done)(status);
}

std::vector<HolderRecord> ClusterDirectory::ListNames(absl::string_view name_prefix,
                                                      absl::string_view after,
                                                      size_t max_names) const {
  std::vector<HolderRecord> names;
  ReaderMutexLock lock(&mu_);
  auto start = after.empty() ? names_.lower_bound(name_prefix) : names_.upper_bound(after);
  if (start != names_.end() && start->first < name_prefix) start = names_.lower_bound(name_prefix);
  for (auto it = start;
       it != names_.end() && absl::StartsWith(it->first, name_prefix) && names.size() < max_names;
       ++it) {
    const HolderRecord* latest = nullptr;
    const int64_t deleted_at = DeletedAtLocked(it->first);
    for (const auto& [node, record] : it->second.holders) {
      if (record.origin <= deleted_at) continue;
      if (latest == nullptr || record.origin > latest->origin) latest = &record;
    }
    if (latest != nullptr) names.push_back(*latest);
  }
  return names;
}

DirectoryStats ClusterDirectory::stats() const {
  ReaderMutexLock lock(&mu_);
  return DirectoryStats{.names = names_.size(),
                        .registered = local_.size(),
                        .remote_deletes = remote_deletes_};
}

// --- mirror ---------------------------------------------------------------

void ClusterDirectory::MirrorLoop() {
  absl::Duration backoff = absl::Milliseconds(100);
  // A broken watch resumes where it stopped (etcd keeps the history), so
  // cluster watchers miss nothing; the directory is read again only at
  // start and when etcd compacted the revisions the watch needs.
  bool read_again = true;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(signal_mu_);
      if (stopping_) return;
    }
    const absl::Status status = MirrorOnce(read_again);
    read_again = !status.ok() && status.code() != absl::StatusCode::kUnavailable &&
                 status.code() != absl::StatusCode::kDeadlineExceeded;
    std::unique_lock<std::mutex> lock(signal_mu_);
    if (stopping_) return;
    if (status.ok()) {
      backoff = absl::Milliseconds(100);
      continue;
    }
    if (status.code() != absl::StatusCode::kOutOfRange) {
      mirror_log_.Note("directory watch", status.ToString(), absl::Now());
    }
    signal_.wait_for(lock, ToChrono(backoff), [this] { return stopping_; });
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

absl::Status ClusterDirectory::MirrorOnce(bool read_again) {
  const std::string directory = DirectoryPrefix(options_.prefix);
  int64_t watch_from = 0;
  {
    ReaderMutexLock lock(&mu_);
    watch_from = mirror_revision_ + 1;
  }
  if (read_again || watch_from == 1) {
    TENSORD_ASSIGN_OR_RETURN(watch_from, ReadDirectory());
  }
  return WatchDirectory(watch_from);
}

absl::StatusOr<int64_t> ClusterDirectory::ReadDirectory() {
  const std::string directory = DirectoryPrefix(options_.prefix);
  TENSORD_ASSIGN_OR_RETURN(EtcdRangeResult range, etcd_->RangePrefix(directory));
  std::map<std::string, NameEntry, std::less<>> names;
  std::vector<std::pair<std::string, int64_t>> tombstones;
  for (const EtcdKeyValue& kv : range.values) {
    absl::StatusOr<DirectoryKey> key = ParseDirectoryKey(options_.prefix, kv.key);
    if (!key.ok()) continue;
    if (key->kind == DirectoryKey::Kind::kTombstone) {
      tombstones.emplace_back(key->name, kv.mod_revision);
      continue;
    }
    absl::StatusOr<HolderRecord> record = DecodeHolder(options_.prefix, kv);
    if (!record.ok()) {
      Log(LogLevel::kWarning, "directory_entry_skipped", {{"error", record.status().ToString()}});
      continue;
    }
    names[record->name].holders[record->node] = *std::move(record);
  }
  {
    MutexLock lock(&mu_);
    names_ = std::move(names);
    tombstones_.clear();
    for (const auto& [name, revision] : tombstones) tombstones_[name] = revision;
    // Changes before this read were not seen here: a cluster watcher
    // positioned before it is told it may have missed some.
    if (range.revision > mirror_revision_) {
      cluster_changes_.RestartHistoryAt(static_cast<uint64_t>(range.revision));
      mirror_revision_ = range.revision;
    }
  }
  {
    std::lock_guard<std::mutex> lock(signal_mu_);
    signal_.notify_all();  // a registrar waiting for the first read
  }
  mirror_log_.Tick(absl::Now() + absl::Hours(1));
  for (const auto& [name, revision] : tombstones) ApplyTombstone(name, revision);
  return range.revision + 1;
}

absl::Status ClusterDirectory::WatchDirectory(int64_t from_revision) {
  return etcd_->WatchPrefix(
      DirectoryPrefix(options_.prefix), from_revision,
      [this](std::vector<EtcdWatchEvent> events) {
        std::vector<std::pair<std::string, int64_t>> deleted;
        std::vector<std::pair<std::string, int64_t>> newer;
        {
          MutexLock lock(&mu_);
          AppendClusterChanges(events);
          for (const EtcdWatchEvent& event : events) {
            absl::StatusOr<DirectoryKey> key = ParseDirectoryKey(options_.prefix, event.kv.key);
            if (!key.ok()) continue;
            if (key->kind == DirectoryKey::Kind::kTombstone) {
              if (event.deleted) {
                tombstones_.erase(key->name);  // its lease ran out
              } else {
                tombstones_[key->name] = event.kv.mod_revision;
                deleted.emplace_back(key->name, event.kv.mod_revision);
              }
              continue;
            }
            ApplyMirrorEvent(event);
            if (!event.deleted && key->node != options_.node_name) {
              auto entry = names_.find(key->name);
              if (entry != names_.end()) {
                auto holder = entry->second.holders.find(key->node);
                if (holder != entry->second.holders.end()) {
                  newer.emplace_back(key->name, holder->second.origin);
                }
              }
            }
          }
        }
        for (const auto& [name, revision] : deleted) ApplyTombstone(name, revision);
        for (const auto& [name, origin] : newer) DropSupersededReplica(name, origin);
        std::lock_guard<std::mutex> lock(signal_mu_);
        return !stopping_;
      },
      watch_cancel_);
}

void ClusterDirectory::AppendClusterChanges(const std::vector<EtcdWatchEvent>& events) {
  // One change per revision: a registrar's transaction (originals it
  // registered; its replicas and re-registrations are not changes) or a
  // delete's (the tombstone). Lease expiries and evictions are not changes
  // of a name: other copies may live on.
  size_t next = 0;
  while (next < events.size()) {
    const int64_t revision = events[next].kv.mod_revision;
    ChangeEvent change;
    change.version = static_cast<uint64_t>(revision);
    for (; next < events.size() && events[next].kv.mod_revision == revision; ++next) {
      const EtcdWatchEvent& event = events[next];
      if (event.deleted) continue;
      absl::StatusOr<DirectoryKey> key = ParseDirectoryKey(options_.prefix, event.kv.key);
      if (!key.ok()) continue;
      if (key->kind == DirectoryKey::Kind::kTombstone) {
        nlohmann::json value = nlohmann::json::parse(event.kv.value, nullptr, false);
        VersionInfo item;
        item.name = key->name;
        if (value.is_object() && value.contains("node") && value["node"].is_string()) {
          item.node = value["node"].get<std::string>();
        }
        change.kind = ChangeEvent::Kind::kDeleted;
        change.items.push_back(std::move(item));
        continue;
      }
      absl::StatusOr<HolderRecord> record = DecodeHolder(options_.prefix, event.kv);
      if (!record.ok() || record->replica || record->origin != event.kv.mod_revision) continue;
      VersionInfo item;
      item.name = record->name;
      item.version = record->version;
      item.total_bytes = record->total_bytes;
      item.crc32c = record->crc32c;
      item.node = record->node;
      if (change.kind == ChangeEvent::Kind::kPublished) change.items.push_back(std::move(item));
    }
    if (revision > mirror_revision_) {
      if (!change.items.empty()) cluster_changes_.Append(std::move(change));
      mirror_revision_ = revision;
    }
  }
}

absl::StatusOr<WatchStart> ClusterDirectory::StartWatch(absl::string_view prefix,
                                                        bool with_existing, uint64_t from_version,
                                                        size_t max_existing) const {
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  WatchStart start;
  ReaderMutexLock lock(&mu_);
  if (from_version > 0) {
    if (from_version > static_cast<uint64_t>(mirror_revision_)) {
      return absl::OutOfRangeError(absl::StrCat("from_version ", from_version,
                                                " is past the cluster directory's revision (",
                                                mirror_revision_, ")"));
    }
    start.position = from_version;
    return start;
  }
  start.position = static_cast<uint64_t>(mirror_revision_);
  if (!with_existing) return start;
  for (auto it = names_.lower_bound(prefix); it != names_.end() && absl::StartsWith(it->first, prefix);
       ++it) {
    const HolderRecord* latest = nullptr;
    const int64_t deleted_at = DeletedAtLocked(it->first);
    for (const auto& [node, record] : it->second.holders) {
      if (record.origin <= deleted_at) continue;
      if (latest == nullptr || record.origin > latest->origin ||
          (record.origin == latest->origin && !record.replica && latest->replica)) {
        latest = &record;
      }
    }
    if (latest == nullptr) continue;
    if (start.existing.size() == max_existing) {
      return absl::OutOfRangeError(absl::StrCat("more than ", max_existing,
                                                " names in the cluster start with '", prefix,
                                                "', the most a watch sends as existing; watch a "
                                                "narrower prefix"));
    }
    VersionInfo info;
    info.name = latest->name;
    info.version = latest->version;
    info.total_bytes = latest->total_bytes;
    info.crc32c = latest->crc32c;
    info.node = latest->node;
    start.existing.push_back(std::move(info));
  }
  return start;
}

void ClusterDirectory::ApplyMirrorEvent(const EtcdWatchEvent& event) {
  if (event.deleted) {
    absl::StatusOr<DirectoryKey> key = ParseDirectoryKey(options_.prefix, event.kv.key);
    if (!key.ok()) return;
    auto entry = names_.find(key->name);
    if (entry == names_.end()) return;
    entry->second.holders.erase(key->node);
    if (entry->second.holders.empty()) names_.erase(entry);
    return;
  }
  absl::StatusOr<HolderRecord> record = DecodeHolder(options_.prefix, event.kv);
  if (!record.ok()) {
    Log(LogLevel::kWarning, "directory_entry_skipped", {{"error", record.status().ToString()}});
    return;
  }
  NameEntry& entry = names_[record->name];
  entry.holders[record->node] = *std::move(record);
}

void ClusterDirectory::ApplyTombstone(const std::string& name, int64_t revision) {
  uint64_t version = 0;
  {
    // A replica being published now has recorded its origin once this is
    // held, and the version read under it is the one to judge.
    std::lock_guard<std::mutex> publishing(replica_publish_mu_);
    version = registry_.LatestVersionOf(name);
    if (version == 0) return;
    // Unregistered local publishes are newer than any delete registered.
    if (OriginOf(name, version) >= revision) return;
  }
  absl::StatusOr<uint64_t> removed = registry_.Delete(name, version);
  if (!removed.ok()) return;  // replaced by a newer publish meanwhile, or gone
  MutexLock lock(&mu_);
  ++remote_deletes_;
  Log(LogLevel::kInfo, "cluster_delete_applied",
      {{"name", name}, {"version", version}, {"revision", revision}});
}

void ClusterDirectory::DropSupersededReplica(const std::string& name, int64_t origin) {
  const uint64_t held = registry_.LatestVersionOf(name);
  if (held == 0) return;
  {
    ReaderMutexLock lock(&mu_);
    auto local = local_.find(name);
    // Only a registered replica: an original stays until replaced or deleted
    // by its owner, and an unregistered copy is not known to be older.
    if (local == local_.end() || local->second.version != held || !local->second.replica ||
        local->second.origin >= origin) {
      return;
    }
  }
  if (registry_.Delete(name, held).ok()) {
    Log(LogLevel::kInfo, "cluster_replica_superseded",
        {{"name", name}, {"version", held}, {"newer_origin", origin}});
  }
}

// --- registrar ------------------------------------------------------------

void ClusterDirectory::RegistrarLoop() {
  uint64_t position = 0;
  int64_t registered_lease = 0;
  bool need_full = true;
  absl::Duration backoff = absl::Milliseconds(100);
  uint64_t seen_wakes = 0;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(signal_mu_);
      if (stopping_) return;
      seen_wakes = wakes_;
    }
    const int64_t lease = lease_();
    absl::Status status;
    if (lease == 0) {
      status = absl::UnavailableError("this node holds no etcd lease at the moment");
    } else if (need_full || lease != registered_lease) {
      status = RegisterAll(lease, position, /*at_start=*/registered_lease == 0);
      if (status.ok()) {
        if (registered_lease != 0) {
          Log(LogLevel::kInfo, "cluster_names_registered_again",
              {{"node", options_.node_name}, {"lease", lease}});
        }
        need_full = false;
        registered_lease = lease;
      }
    } else {
      bool missed = false;
      status = RegisterChanges(lease, position, missed);
      if (missed) need_full = true;
    }
    {
      MutexLock lock(&mu_);
      registrar_status_ = status;
      if (status.ok() && !need_full) registered_position_ = position;
    }
    RunDueWaiters(/*stopping=*/false);
    std::unique_lock<std::mutex> lock(signal_mu_);
    if (stopping_) return;
    if (status.ok()) {
      backoff = absl::Milliseconds(100);
      registrar_log_.Tick(absl::Now());
      if (need_full) continue;
      // Until the feed moves; a periodic look notices a new lease and
      // expires waiters.
      signal_.wait_for(lock, std::chrono::milliseconds(250),
                       [&] { return stopping_ || wakes_ != seen_wakes; });
    } else {
      need_full = true;  // the lease and what etcd holds are unknown now
      registrar_log_.Note("directory registration", status.ToString(), absl::Now());
      signal_.wait_for(lock, ToChrono(backoff), [&] { return stopping_; });
      backoff = std::min(backoff * 2, absl::Seconds(2));
    }
  }
}

absl::Status ClusterDirectory::RegisterAll(int64_t lease, uint64_t& position, bool at_start) {
  absl::flat_hash_set<std::string> oldest;
  if (at_start) {
    // What a node holds when it starts (a restored snapshot, a preload) may
    // be older than what others published meanwhile: judged against the
    // directory, once the mirror has read it.
    std::unique_lock<std::mutex> lock(signal_mu_);
    signal_.wait_for(lock, std::chrono::seconds(10), [this] {
      ReaderMutexLock state(&mu_);
      return stopping_ || mirror_revision_ > 0;
    });
  }
  TENSORD_ASSIGN_OR_RETURN(WatchStart start,
                           registry_.StartWatch("", /*with_existing=*/true, 0,
                                                std::max<uint64_t>(registry_.max_tensors(), 1)));
  absl::flat_hash_map<std::string, uint64_t> held;
  for (const VersionInfo& info : start.existing) held[info.name] = info.version;
  std::vector<std::string> unregister;
  {
    ReaderMutexLock lock(&mu_);
    for (const auto& [name, entry] : names_) {
      if (entry.holders.contains(options_.node_name) && !held.contains(name)) {
        unregister.push_back(name);
      }
    }
    for (const auto& [name, local] : local_) {
      if (!held.contains(name)) unregister.push_back(name);
    }
  }
  std::sort(unregister.begin(), unregister.end());
  unregister.erase(std::unique(unregister.begin(), unregister.end()), unregister.end());
  std::vector<VersionInfo> publish;
  std::vector<std::pair<std::string, uint64_t>> deleted_meanwhile;
  if (at_start) {
    ReaderMutexLock lock(&mu_);
    for (VersionInfo& info : start.existing) {
      if (DeletedAtLocked(info.name) != 0) {
        deleted_meanwhile.emplace_back(info.name, info.version);  // deleted while this node was away
        continue;
      }
      // Another node holds a version: this one counts as the oldest, so it
      // never outranks a publish made while this node was away.
      auto entry = names_.find(info.name);
      if (entry != names_.end() && MaxOtherOrigin(entry->second, options_.node_name, 0) > 0) {
        oldest.insert(info.name);
      }
      publish.push_back(std::move(info));
    }
  } else {
    publish = std::move(start.existing);
  }
  for (const auto& [name, version] : deleted_meanwhile) {
    if (registry_.Delete(name, version).ok()) {
      Log(LogLevel::kInfo, "cluster_delete_applied", {{"name", name}, {"version", version},
                                                      {"reason", "deleted while this node was away"}});
    }
  }
  TENSORD_RETURN_IF_ERROR(WriteOps(lease, publish, unregister, &oldest));
  {
    MutexLock lock(&mu_);
    // Pending replica origins of versions no longer held are dropped.
    for (auto it = replicas_.begin(); it != replicas_.end();) {
      auto held_it = held.find(it->first.first);
      if (held_it == held.end() || held_it->second != it->first.second) {
        replicas_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  position = start.position;
  return absl::OkStatus();
}

absl::Status ClusterDirectory::RegisterChanges(int64_t lease, uint64_t& position, bool& missed) {
  while (true) {
    ChangeRead read = registry_.changes().ReadAfter(position, kFeedBatch);
    if (read.missed_to != 0) {
      missed = true;
      return absl::OkStatus();
    }
    if (read.events.empty()) return absl::OkStatus();
    // The last change of each name wins: nullopt unregisters.
    std::map<std::string, std::optional<VersionInfo>> last;
    uint64_t read_to = position;
    for (const std::shared_ptr<const ChangeEvent>& event : read.events) {
      for (const VersionInfo& item : event->items) {
        if (event->kind == ChangeEvent::Kind::kPublished) {
          last[item.name] = item;
        } else {
          last[item.name] = std::nullopt;
        }
      }
      read_to = event->version;
    }
    std::vector<VersionInfo> publish;
    std::vector<std::string> unregister;
    for (auto& [name, info] : last) {
      if (info.has_value()) {
        publish.push_back(*std::move(info));
      } else {
        unregister.push_back(name);
      }
    }
    TENSORD_RETURN_IF_ERROR(WriteOps(lease, publish, unregister));
    position = read_to;
    // Puts waiting on their registration hear it batch by batch, even while
    // new changes keep coming.
    {
      MutexLock lock(&mu_);
      registered_position_ = position;
    }
    RunDueWaiters(/*stopping=*/false);
  }
}

absl::Status ClusterDirectory::WriteOps(int64_t lease, const std::vector<VersionInfo>& publish,
                                        const std::vector<std::string>& unregister,
                                        const absl::flat_hash_set<std::string>* oldest) {
  // Waits for a pull whose publish the feed already shows to record its origin.
  { std::lock_guard<std::mutex> publishing(replica_publish_mu_); }
  size_t next_publish = 0;
  size_t next_unregister = 0;
  while (next_publish < publish.size() || next_unregister < unregister.size()) {
    etcdserverpb::TxnRequest txn;
    std::vector<std::pair<const VersionInfo*, HolderRecord>> written;
    std::vector<const std::string*> removed;
    {
      ReaderMutexLock lock(&mu_);
      while (next_publish < publish.size() &&
             static_cast<size_t>(txn.success_size()) < options_.max_ops_per_txn) {
        const VersionInfo& info = publish[next_publish++];
        HolderRecord record{.name = info.name,
                            .node = options_.node_name,
                            .address = options_.advertise_address,
                            .version = info.version,
                            .total_bytes = info.total_bytes,
                            .crc32c = info.crc32c};
        if (auto replica = replicas_.find(std::pair(info.name, info.version));
            replica != replicas_.end()) {
          record.origin = replica->second.origin;
          record.replica = true;
        } else if (auto local = local_.find(info.name);
                   local != local_.end() && local->second.version == info.version) {
          record.origin = local->second.origin;  // registered before, under another lease
          record.replica = local->second.replica;
        } else if (oldest != nullptr && oldest->contains(info.name)) {
          record.origin = 1;
        }
        etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
        put->set_key(HolderKey(options_.prefix, info.name, options_.node_name));
        put->set_value(EncodeHolderValue(record));
        put->set_lease(lease);
        written.emplace_back(&info, std::move(record));
      }
      while (next_unregister < unregister.size() &&
             static_cast<size_t>(txn.success_size()) < options_.max_ops_per_txn) {
        const std::string& name = unregister[next_unregister++];
        txn.add_success()->mutable_request_delete_range()->set_key(
            HolderKey(options_.prefix, name, options_.node_name));
        removed.push_back(&name);
      }
    }
    TENSORD_ASSIGN_OR_RETURN(etcdserverpb::TxnResponse response, etcd_->Txn(txn));
    const int64_t revision = response.header().revision();
    // Copies registered under an origin older than a delete the mirror saw
    // meanwhile (its tombstone came before this answer) are dropped now.
    std::vector<std::pair<std::string, uint64_t>> stale;
    {
      MutexLock lock(&mu_);
      for (const auto& [info, record] : written) {
        const int64_t origin = record.origin != 0 ? record.origin : revision;
        local_[info->name] =
            LocalEntry{.version = info->version, .origin = origin, .replica = record.replica};
        replicas_.erase(std::pair(info->name, info->version));
        if (origin < DeletedAtLocked(info->name)) stale.emplace_back(info->name, info->version);
      }
      for (const std::string* name : removed) local_.erase(*name);
    }
    for (const auto& [name, version] : stale) {
      if (registry_.Delete(name, version).ok()) {
        Log(LogLevel::kInfo, "cluster_delete_applied", {{"name", name}, {"version", version}});
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tensord
