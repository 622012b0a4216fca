#include "service/cluster/memory_kv_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tensord {
namespace {

bool InRange(const std::string& key, const std::string& from, const std::string& range_end) {
  if (range_end.empty()) return key == from;
  if (key < from) return false;
  return range_end == std::string(1, '\0') || key < range_end;
}

}  // namespace

EtcdKeyValue MemoryKvStore::ValueOf(const std::string& key, const Entry& entry) {
  return EtcdKeyValue{.key = key,
                      .value = entry.value,
                      .create_revision = entry.create_revision,
                      .mod_revision = entry.mod_revision,
                      .version = entry.version,
                      .lease = entry.lease};
}

MemoryKvStore::~MemoryKvStore() {
  MutexLock lock(&mu_);
  closing_ = true;
  changed_.SignalAll();
}

absl::Status MemoryKvStore::CheckReachable() const {
  if (reachable_) return absl::OkStatus();
  return absl::UnavailableError("the in-memory store is switched unreachable");
}

const MemoryKvStore::Entry* MemoryKvStore::CurrentLocked(const std::string& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.empty() || !it->second.back().second.has_value()) {
    return nullptr;
  }
  return &*it->second.back().second;
}

bool MemoryKvStore::HoldsLocked(const KvCompare& compare) const {
  const Entry* entry = CurrentLocked(compare.key);
  switch (compare.field) {
    case KvCompare::Field::kCreateRevision:
      return (entry == nullptr ? 0 : entry->create_revision) == compare.number;
    case KvCompare::Field::kModRevision:
      return (entry == nullptr ? 0 : entry->mod_revision) == compare.number;
    case KvCompare::Field::kLease: return (entry == nullptr ? 0 : entry->lease) == compare.number;
    case KvCompare::Field::kValue: return entry != nullptr && entry->value == compare.value;
  }
  return false;
}

std::vector<std::string> MemoryKvStore::KeysInLocked(const std::string& key,
                                                     const std::string& range_end) const {
  std::vector<std::string> keys;
  if (range_end.empty()) {
    if (CurrentLocked(key) != nullptr) keys.push_back(key);
    return keys;
  }
  for (auto it = keys_.lower_bound(key); it != keys_.end(); ++it) {
    if (!InRange(it->first, key, range_end)) break;
    if (CurrentLocked(it->first) != nullptr) keys.push_back(it->first);
  }
  return keys;
}

void MemoryKvStore::DeleteKeyLocked(const std::string& key, int64_t revision,
                                    std::vector<EtcdWatchEvent>& events) {
  const Entry* entry = CurrentLocked(key);
  if (entry == nullptr) return;
  if (auto lease = leases_.find(entry->lease); entry->lease != 0 && lease != leases_.end()) {
    lease->second.erase(key);
  }
  keys_[key].emplace_back(revision, std::nullopt);
  events.push_back(EtcdWatchEvent{.deleted = true, .kv = {.key = key, .mod_revision = revision}});
}

absl::StatusOr<KvOpResult> MemoryKvStore::ApplyLocked(const KvOp& op, int64_t revision,
                                                      std::vector<EtcdWatchEvent>& events) {
  KvOpResult result;
  switch (op.kind) {
    case KvOp::Kind::kPut: {
      if (op.lease != 0 && !leases_.contains(op.lease)) {
        return absl::NotFoundError(absl::StrCat("lease ", op.lease, " not found"));
      }
      const Entry* old = CurrentLocked(op.key);
      if (op.return_previous && old != nullptr) result.previous.push_back(ValueOf(op.key, *old));
      Entry entry{.value = op.value,
                  .create_revision = old == nullptr ? revision : old->create_revision,
                  .mod_revision = revision,
                  .version = old == nullptr ? 1 : old->version + 1,
                  .lease = op.lease};
      if (old != nullptr && old->lease != 0 && old->lease != op.lease) {
        if (auto lease = leases_.find(old->lease); lease != leases_.end()) {
          lease->second.erase(op.key);
        }
      }
      if (op.lease != 0) leases_[op.lease].insert(op.key);
      keys_[op.key].emplace_back(revision, entry);
      events.push_back(EtcdWatchEvent{.deleted = false,
                                      .kv = {.key = op.key,
                                             .value = entry.value,
                                             .create_revision = entry.create_revision,
                                             .mod_revision = entry.mod_revision,
                                             .version = entry.version,
                                             .lease = entry.lease}});
      return result;
    }
    case KvOp::Kind::kDelete:
      for (const std::string& key : KeysInLocked(op.key, op.range_end)) {
        if (op.return_previous) result.previous.push_back(ValueOf(key, *CurrentLocked(key)));
        DeleteKeyLocked(key, revision, events);
        ++result.deleted;
      }
      return result;
    case KvOp::Kind::kGet:
      for (const std::string& key : KeysInLocked(op.key, op.range_end)) {
        result.values.push_back(ValueOf(key, *CurrentLocked(key)));
      }
      return result;
  }
  return result;
}

absl::StatusOr<KvTxnResult> MemoryKvStore::Txn(std::span<const KvCompare> compares,
                                               std::span<const KvOp> success,
                                               std::span<const KvOp> failure) {
  MutexLock lock(&mu_);
  if (absl::Status reachable = CheckReachable(); !reachable.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return reachable;
  }
  bool holds = true;  // a loop, not all_of: the analysis cannot see mu_ held inside a lambda
  for (const KvCompare& compare : compares) holds = holds && HoldsLocked(compare);
  const std::span<const KvOp> ops = holds ? success : failure;
  const bool writes = std::any_of(ops.begin(), ops.end(),
                                  [](const KvOp& op) { return op.kind != KvOp::Kind::kGet; });
  if (writes && !write_failure_.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return write_failure_;
  }
  // etcd refuses a key written twice in one transaction, and a put on a
  // lease it does not have, before anything is written.
  std::set<std::string> written;
  for (const KvOp& op : ops) {
    if (op.kind == KvOp::Kind::kGet) continue;
    if (!written.insert(op.key).second) {
      return absl::InvalidArgumentError("etcdserver: duplicate key given in txn request");
    }
    if (op.kind == KvOp::Kind::kPut && op.lease != 0 && !leases_.contains(op.lease)) {
      return absl::NotFoundError("etcdserver: requested lease not found");
    }
  }
  KvTxnResult result;
  result.succeeded = holds;
  const int64_t revision = writes ? revision_ + 1 : revision_;
  std::vector<EtcdWatchEvent> events;
  for (const KvOp& op : ops) {
    absl::StatusOr<KvOpResult> applied = ApplyLocked(op, revision, events);
    if (!applied.ok()) return applied.status();
    result.results.push_back(*std::move(applied));
  }
  if (!events.empty()) {
    revision_ = revision;
    ++write_txns_;
    for (EtcdWatchEvent& event : events) history_.emplace_back(revision, std::move(event));
    changed_.SignalAll();
  }
  result.revision = revision_;
  return result;
}

absl::StatusOr<KvPage> MemoryKvStore::Range(absl::string_view key, absl::string_view range_end,
                                            int64_t revision, int64_t limit) {
  ReaderMutexLock lock(&mu_);
  if (absl::Status reachable = CheckReachable(); !reachable.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return reachable;
  }
  const int64_t at = revision == 0 ? revision_ : revision;
  if (at < compacted_) {
    return absl::OutOfRangeError("etcdserver: mvcc: required revision has been compacted");
  }
  if (at > revision_) {
    return absl::OutOfRangeError("etcdserver: mvcc: required revision is a future revision");
  }
  KvPage page;
  page.revision = revision_;
  const std::string from(key);
  const std::string end(range_end);
  for (auto it = keys_.lower_bound(from); it != keys_.end(); ++it) {
    if (!InRange(it->first, from, end)) break;
    // The key's state as of `at`.
    const std::optional<Entry>* state = nullptr;
    for (const auto& [changed_at, entry] : it->second) {
      if (changed_at > at) break;
      state = &entry;
    }
    if (state == nullptr || !state->has_value()) continue;
    if (limit > 0 && static_cast<int64_t>(page.values.size()) == limit) {
      page.more = true;
      break;
    }
    page.values.push_back(ValueOf(it->first, **state));
  }
  return page;
}

absl::StatusOr<std::vector<EtcdKeyValue>> MemoryKvStore::KeysCreatedAt(absl::string_view key,
                                                                       absl::string_view range_end,
                                                                       int64_t revision) {
  ReaderMutexLock lock(&mu_);
  if (absl::Status reachable = CheckReachable(); !reachable.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return reachable;
  }
  std::vector<EtcdKeyValue> created;
  for (const std::string& name : KeysInLocked(std::string(key), std::string(range_end))) {
    const Entry* entry = CurrentLocked(name);
    if (entry->create_revision == revision) created.push_back(ValueOf(name, *entry));
  }
  return created;
}

absl::Status MemoryKvStore::Watch(absl::string_view prefix, int64_t start_revision,
                                  const WatchHandler& on_events, KvWatchCancel& cancel) {
  {
    MutexLock cancel_lock(&cancel.mu_);
    if (cancel.cancelled_) return absl::CancelledError("watch cancelled");
    cancel.wake_ = [this] {
      MutexLock lock(&mu_);
      changed_.SignalAll();
    };
  }
  struct ClearWake {
    KvWatchCancel& cancel;
    ~ClearWake() {
      MutexLock lock(&cancel.mu_);
      cancel.wake_ = nullptr;
    }
  } clear{cancel};
  const std::string watched(prefix);
  MutexLock lock(&mu_);
  if (absl::Status reachable = CheckReachable(); !reachable.ok()) return reachable;
  const uint64_t epoch = reach_epoch_;
  int64_t next = start_revision == 0 ? revision_ + 1 : start_revision;
  // As etcd: the compaction revision itself can still be watched from.
  if (next < compacted_) {
    return absl::OutOfRangeError(
        absl::StrCat("revision ", next, " was compacted (oldest kept: ", compacted_, ")"));
  }
  {
    mu_.Unlock();
    const bool more = on_events({});  // established
    mu_.Lock();
    if (!more) return absl::OkStatus();
  }
  while (true) {
    if (cancel.cancelled()) return absl::CancelledError("watch cancelled");
    if (closing_) return absl::UnavailableError("the in-memory store is closing");
    if (!reachable_ || reach_epoch_ != epoch) {
      return absl::UnavailableError("the in-memory store was switched unreachable");
    }
    if (next < compacted_) {
      return absl::OutOfRangeError("the watched revisions were compacted away");
    }
    // The first unseen revision's events under the prefix, whole.
    auto it =
        std::lower_bound(history_.begin(), history_.end(), next,
                         [](const auto& item, int64_t revision) { return item.first < revision; });
    if (it == history_.end()) {
      changed_.Wait(&mu_);
      continue;
    }
    const int64_t revision = it->first;
    std::vector<EtcdWatchEvent> events;
    for (; it != history_.end() && it->first == revision; ++it) {
      if (absl::StartsWith(it->second.kv.key, watched)) events.push_back(it->second);
    }
    next = revision + 1;
    if (events.empty()) continue;
    mu_.Unlock();
    const bool more = on_events(std::move(events));
    mu_.Lock();
    if (!more) return absl::OkStatus();
  }
}

absl::StatusOr<EtcdLease> MemoryKvStore::GrantLease(absl::Duration ttl) {
  MutexLock lock(&mu_);
  if (absl::Status reachable = CheckReachable(); !reachable.ok()) return reachable;
  const int64_t id = next_lease_++;
  leases_[id];
  return EtcdLease{.id = id, .ttl = std::max(ttl, absl::Seconds(1))};
}

absl::Status MemoryKvStore::RevokeLease(int64_t lease) {
  {
    ReaderMutexLock lock(&mu_);
    if (absl::Status reachable = CheckReachable(); !reachable.ok()) return reachable;
    if (!leases_.contains(lease)) return absl::NotFoundError("lease not found");
  }
  ExpireLease(lease);
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> MemoryKvStore::KeepAliveOnce(int64_t lease) {
  ReaderMutexLock lock(&mu_);
  if (absl::Status reachable = CheckReachable(); !reachable.ok()) return reachable;
  if (!leases_.contains(lease))
    return absl::NotFoundError(absl::StrCat("lease ", lease, " has expired"));
  return absl::Seconds(5);
}

absl::Status MemoryKvStore::Compact(int64_t revision) {
  MutexLock lock(&mu_);
  if (absl::Status reachable = CheckReachable(); !reachable.ok()) return reachable;
  if (revision > revision_) {
    return absl::OutOfRangeError("etcdserver: mvcc: required revision is a future revision");
  }
  if (revision <= compacted_) return absl::OkStatus();
  compacted_ = revision;
  std::erase_if(history_, [&](const auto& item) { return item.first < revision; });
  changed_.SignalAll();
  return absl::OkStatus();
}

void MemoryKvStore::SetReachable(bool reachable) {
  MutexLock lock(&mu_);
  if (reachable_ && !reachable) ++reach_epoch_;
  reachable_ = reachable;
  changed_.SignalAll();
}

void MemoryKvStore::ExpireLease(int64_t lease) {
  MutexLock lock(&mu_);
  auto it = leases_.find(lease);
  if (it == leases_.end()) return;
  const std::set<std::string> keys = it->second;
  leases_.erase(it);
  if (keys.empty()) return;
  const int64_t revision = revision_ + 1;
  std::vector<EtcdWatchEvent> events;
  for (const std::string& key : keys) DeleteKeyLocked(key, revision, events);
  revision_ = revision;
  for (EtcdWatchEvent& event : events) history_.emplace_back(revision, std::move(event));
  changed_.SignalAll();
}

void MemoryKvStore::FailWritesWith(absl::Status status) {
  MutexLock lock(&mu_);
  write_failure_ = std::move(status);
}

int64_t MemoryKvStore::revision() const {
  ReaderMutexLock lock(&mu_);
  return revision_;
}

uint64_t MemoryKvStore::write_txns() const {
  ReaderMutexLock lock(&mu_);
  return write_txns_;
}

}  // namespace tensord
