// A KvStore in memory with etcd's semantics (one revision per write
// transaction, create/mod revisions, leases that delete their keys in one
// revision, watches from a past revision, compaction), for unit tests of
// the cluster logic without an etcd process. Faults are switched by hand:
// an unreachable store, an expired lease, a compaction.
#ifndef TENSORD_SERVICE_CLUSTER_MEMORY_KV_STORE_H_
#define TENSORD_SERVICE_CLUSTER_MEMORY_KV_STORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "service/cluster/kv_store.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe.
class MemoryKvStore final : public KvStore {
 public:
  MemoryKvStore() = default;
  ~MemoryKvStore() override;

  absl::StatusOr<KvTxnResult> Txn(std::span<const KvCompare> compares,
                                  std::span<const KvOp> success,
                                  std::span<const KvOp> failure) override;
  absl::StatusOr<KvPage> Range(absl::string_view key, absl::string_view range_end, int64_t revision,
                               int64_t limit) override;
  absl::StatusOr<std::vector<EtcdKeyValue>> KeysCreatedAt(absl::string_view key,
                                                          absl::string_view range_end,
                                                          int64_t revision) override;
  absl::Status Watch(absl::string_view prefix, int64_t start_revision,
                     const WatchHandler& on_events, KvWatchCancel& cancel) override;
  absl::StatusOr<EtcdLease> GrantLease(absl::Duration ttl) override;
  absl::Status RevokeLease(int64_t lease) override;
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease) override;
  absl::Status Compact(int64_t revision) override;
  uint64_t errors() const override { return errors_.load(std::memory_order_relaxed); }

  // Faults. While unreachable every call fails UNAVAILABLE and open
  // watches end with UNAVAILABLE.
  void SetReachable(bool reachable);
  // The lease runs out: its keys go in one revision.
  void ExpireLease(int64_t lease);
  // Answers Txn with this error once per call until cleared (e.g. NOSPACE).
  void FailWritesWith(absl::Status status);

  int64_t revision() const;
  // Write transactions run so far.
  uint64_t write_txns() const;

 private:
  struct Entry {
    std::string value;
    int64_t create_revision = 0;
    int64_t mod_revision = 0;
    int64_t version = 0;
    int64_t lease = 0;
  };
  static EtcdKeyValue ValueOf(const std::string& key, const Entry& entry);
  // One key's states over time: (revision, state), nullopt when deleted.
  using KeyHistory = std::vector<std::pair<int64_t, std::optional<Entry>>>;

  absl::Status CheckReachable() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  const Entry* CurrentLocked(const std::string& key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool HoldsLocked(const KvCompare& compare) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Applies one op at `revision`; appends its events.
  absl::StatusOr<KvOpResult> ApplyLocked(const KvOp& op, int64_t revision,
                                         std::vector<EtcdWatchEvent>& events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteKeyLocked(const std::string& key, int64_t revision,
                       std::vector<EtcdWatchEvent>& events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> KeysInLocked(const std::string& key, const std::string& range_end) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  CondVar changed_;
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t compacted_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, KeyHistory> keys_ ABSL_GUARDED_BY(mu_);
  // Every write's events in revision order (from compacted_ on).
  std::vector<std::pair<int64_t, EtcdWatchEvent>> history_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::set<std::string>> leases_ ABSL_GUARDED_BY(mu_);
  int64_t next_lease_ ABSL_GUARDED_BY(mu_) = 0x1000;
  bool reachable_ ABSL_GUARDED_BY(mu_) = true;
  uint64_t reach_epoch_ ABSL_GUARDED_BY(mu_) = 0;  // bumped when cut off
  absl::Status write_failure_ ABSL_GUARDED_BY(mu_);
  uint64_t write_txns_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> errors_{0};
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_MEMORY_KV_STORE_H_
