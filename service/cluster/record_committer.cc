#include "service/cluster/record_committer.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "service/cluster/group_index.h"

namespace tensord {

RecordCommitter::RecordCommitter(std::shared_ptr<KvStore> store, RecordCommitterOptions options)
    : store_(std::move(store)), options_(std::move(options)) {
  const size_t threads = std::max<size_t>(options_.threads, 1);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { WorkLoop(); });
}

RecordCommitter::~RecordCommitter() {
  std::deque<Pending> abandoned;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    abandoned.swap(queue_);
    work_ready_.SignalAll();
  }
  for (std::thread& thread : threads_) thread.join();
  for (Pending& pending : abandoned) {
    std::move(pending.done)(
        absl::UnavailableError("the node is shutting down; the change was not written to etcd"));
  }
}

void RecordCommitter::Commit(std::vector<RecordChange> changes, Done done) {
  size_t keys = 0;
  absl::flat_hash_set<std::string> names;
  for (const RecordChange& change : changes) {
    keys += 1 + change.also.size();
    if (!names.insert(change.name).second) {
      std::move(done)(absl::InvalidArgumentError(
          absl::StrCat("'", change.name, "' is given twice in one atomic change")));
      return;
    }
  }
  if (keys > options_.max_ops_per_txn) {
    std::move(done)(absl::ResourceExhaustedError(absl::StrCat(
        "an atomic change of ", keys, " etcd keys is more than one etcd transaction holds (",
        options_.max_ops_per_txn,
        ", --etcd-max-txn-ops, which must not exceed etcd's "
        "--max-txn-ops)")));
    return;
  }
  if (keys == 0) {
    std::move(done)(RecordCommitted{});
    return;
  }
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back(Pending{std::move(changes), keys, std::move(done)});
      work_ready_.Signal();
      return;
    }
  }
  std::move(done)(absl::UnavailableError("the node is shutting down; nothing was written"));
}

RecordCommitter::ChangeKind RecordCommitter::KindOf(const Pending& pending) {
  // A group of one item too: a revision orders at most one group.
  const RecordChange& first = pending.changes.front();
  if (pending.changes.size() > 1 || (first.record.has_value() && !first.record->group.empty())) {
    return ChangeKind::kGroup;
  }
  return pending.changes.front().record.has_value() ? ChangeKind::kPut : ChangeKind::kDelete;
}

void RecordCommitter::WorkLoop() {
  while (true) {
    std::vector<Pending> batch;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) work_ready_.Wait(&mu_);
      if (stopping_) return;
      // Whole pendings in arrival order while they fit and touch no key
      // twice (etcd refuses that); the rest waits for the next transaction.
      // A transaction carries one kind of change: single puts, or deletes,
      // or one atomic group alone, so the revision a watch reports is one
      // kind of event (and a group is exactly one).
      size_t keys = 0;
      absl::flat_hash_set<std::string> names;
      // Sized once: growing it step by step cost a rehash each.
      names.reserve(std::min(options_.max_ops_per_txn, queue_.size()));
      const ChangeKind kind = KindOf(queue_.front());
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (keys + it->keys > options_.max_ops_per_txn) break;
        if (kind == ChangeKind::kGroup && !batch.empty()) break;
        const bool clash =
            std::any_of(it->changes.begin(), it->changes.end(),
                        [&](const RecordChange& c) { return names.contains(c.name); });
        if (clash || KindOf(*it) != kind) {
          ++it;
          continue;
        }
        for (const RecordChange& change : it->changes) names.insert(change.name);
        keys += it->keys;
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
      }
      if (!queue_.empty()) work_ready_.Signal();  // another thread takes the rest
    }
    CommitBatch(std::move(batch));
  }
}

void RecordCommitter::CommitBatch(std::vector<Pending> batch) {
  std::vector<KvOp> ops;
  // Per pending, the indices of its deletes' results.
  std::vector<std::vector<size_t>> deletes(batch.size());
  // The indices of every record's op: each returns the record it replaced,
  // whose group (if any) this transaction breaks.
  std::vector<size_t> record_ops;
  absl::flat_hash_set<std::string> groups_written;
  for (size_t p = 0; p < batch.size(); ++p) {
    for (RecordChange& change : batch[p].changes) {
      const std::string key = NameRecordKey(options_.prefix, change.name);
      record_ops.push_back(ops.size());
      if (change.record.has_value()) {
        if (!change.record->group.empty()) groups_written.insert(change.record->group);
        ops.push_back(KvOp::Put(key, EncodeNameRecord(*change.record, /*with_origin=*/false))
                          .ReturningPrevious());
      } else {
        deletes[p].push_back(ops.size());
        ops.push_back(KvOp::Delete(key).ReturningPrevious());
      }
      for (KvOp& extra : change.also) ops.push_back(std::move(extra));
    }
  }
  absl::StatusOr<KvTxnResult> written = store_->Txn({}, ops, {});
  {
    MutexLock lock(&mu_);
    ++transactions_;
    if (written.ok()) {
      for (const Pending& pending : batch) changes_committed_ += pending.changes.size();
    }
  }
  for (size_t p = 0; p < batch.size(); ++p) {
    if (!written.ok()) {
      std::move(batch[p].done)(written.status());
      continue;
    }
    RecordCommitted committed{.revision = written->revision};
    for (size_t index : deletes[p]) {
      if (written->results[index].deleted > 0) committed.removed = true;
    }
    std::move(batch[p].done)(committed);
  }
  if (!written.ok()) return;
  // After the answers: no put waits on it. The records the transaction
  // replaced name the groups it broke.
  std::vector<EtcdKeyValue> replaced;
  for (size_t index : record_ops) {
    for (EtcdKeyValue& kv : written->results[index].previous) replaced.push_back(std::move(kv));
  }
  const size_t removed = RemoveGroupsBrokenBy(*store_, options_.prefix, replaced, groups_written,
                                              options_.max_ops_per_txn);
  MutexLock lock(&mu_);
  group_index_keys_removed_ += removed;
}

uint64_t RecordCommitter::transactions() const {
  MutexLock lock(&mu_);
  return transactions_;
}

uint64_t RecordCommitter::changes_committed() const {
  MutexLock lock(&mu_);
  return changes_committed_;
}

uint64_t RecordCommitter::group_index_keys_removed() const {
  MutexLock lock(&mu_);
  return group_index_keys_removed_;
}

}  // namespace tensord
