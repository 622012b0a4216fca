// Writes name records in group commits: every change waiting when a
// transaction starts goes into it (up to --etcd-max-txn-ops keys), so
// concurrent puts, the items of a batch and deletes share one etcd commit
// (one Raft round and fsync) instead of paying one each. A change is
// acknowledged with the revision that ordered it. A transaction that
// overwrote or removed a member of an atomic group then removes that
// group's index key (group_index.h).
#ifndef TENSORD_SERVICE_CLUSTER_RECORD_COMMITTER_H_
#define TENSORD_SERVICE_CLUSTER_RECORD_COMMITTER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "service/cluster/kv_store.h"
#include "service/cluster/name_record.h"
#include "service/common/mutex.h"

namespace tensord {

struct RecordCommitterOptions {
  std::string prefix;
  // Keys per etcd transaction (etcd's --max-txn-ops).
  size_t max_ops_per_txn = 128;
  // Transactions in flight at once.
  size_t threads = 4;
};

// One record written (a new version of the name: its origin is the commit's
// revision) or removed.
struct RecordChange {
  std::string name;
  std::optional<NameRecord> record;  // nullopt: delete the name's record
  // Extra keys written in the same transaction (an atomic group's record).
  std::vector<KvOp> also;
};

struct RecordCommitted {
  int64_t revision = 0;  // the etcd revision that ordered the change
  bool removed = false;  // a delete that found a record to remove
};

// Thread-safe.
class RecordCommitter {
 public:
  using Done = absl::AnyInvocable<void(absl::StatusOr<RecordCommitted>) &&>;

  RecordCommitter(std::shared_ptr<KvStore> store, RecordCommitterOptions options);
  // Answers what waits UNAVAILABLE and joins the threads.
  ~RecordCommitter();
  RecordCommitter(const RecordCommitter&) = delete;
  RecordCommitter& operator=(const RecordCommitter&) = delete;

  // Writes `changes` in one transaction (all or none: the items of an
  // atomic group), sharing it with other waiting changes when they fit.
  // `done` runs on a committer thread. An etcd failure is every change's
  // answer: UNAVAILABLE (the change may or may not have been made),
  // RESOURCE_EXHAUSTED (etcd's quota), and so on. More keys than one
  // transaction may hold is RESOURCE_EXHAUSTED naming the limit.
  void Commit(std::vector<RecordChange> changes, Done done);

  size_t max_ops_per_txn() const { return options_.max_ops_per_txn; }
  uint64_t transactions() const;
  uint64_t changes_committed() const;
  uint64_t group_index_keys_removed() const;

 private:
  struct Pending {
    std::vector<RecordChange> changes;
    size_t keys = 0;
    Done done;
  };
  enum class ChangeKind { kPut, kDelete, kGroup };
  static ChangeKind KindOf(const Pending& pending);
  void WorkLoop();
  void CommitBatch(std::vector<Pending> batch);

  const std::shared_ptr<KvStore> store_;
  const RecordCommitterOptions options_;

  mutable Mutex mu_;
  CondVar work_ready_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t transactions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t changes_committed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t group_index_keys_removed_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_RECORD_COMMITTER_H_
