#include "service/cluster/history_compactor.h"

#include <utility>
#include <vector>

#include "service/cluster/group_index.h"
#include "service/common/log.h"

namespace tensord {

HistoryCompactor::HistoryCompactor(std::shared_ptr<KvStore> store, MemberList& members,
                                   std::string self, std::string prefix, size_t max_txn_ops,
                                   absl::Duration interval)
    : store_(std::move(store)),
      members_(members),
      self_(std::move(self)),
      prefix_(std::move(prefix)),
      max_txn_ops_(max_txn_ops),
      interval_(interval) {}

HistoryCompactor::~HistoryCompactor() { Stop(); }

void HistoryCompactor::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void HistoryCompactor::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

bool HistoryCompactor::FirstLiveMember() const {
  // A node that is not listed (its lease lapsed) leaves it to the others.
  const std::vector<ClusterMember> members = members_.members();
  return !members.empty() && members.front().node_name == self_;
}

bool HistoryCompactor::CompactOnce() {
  if (!FirstLiveMember()) {
    remembered_ = 0;  // another node compacts; start afresh if that changes
    return false;
  }
  absl::StatusOr<int64_t> now = KvRevisionNow(*store_);
  if (!now.ok()) return false;
  const int64_t target = remembered_;
  remembered_ = *now;
  if (target <= compacted_to_.load(std::memory_order_relaxed)) return false;
  if (absl::Status compacted = store_->Compact(target); !compacted.ok()) {
    Log(LogLevel::kWarning, "etcd_compaction_failed",
        {{"revision", target}, {"error", compacted.ToString()}});
    return false;
  }
  compacted_to_.store(target, std::memory_order_relaxed);
  Log(LogLevel::kInfo, "etcd_compacted", {{"revision", target}});
  return true;
}

absl::StatusOr<size_t> HistoryCompactor::SweepOnce() {
  absl::StatusOr<size_t> removed = SweepBrokenGroups(*store_, prefix_, max_txn_ops_);
  if (!removed.ok()) {
    Log(LogLevel::kWarning, "cluster_group_index_sweep_failed",
        {{"error", removed.status().ToString()}});
  } else if (*removed > 0) {
    Log(LogLevel::kInfo, "cluster_group_index_swept", {{"removed", *removed}});
  }
  return removed;
}

void HistoryCompactor::Loop() {
  const bool compacting = interval_ > absl::ZeroDuration();
  const absl::Duration period = compacting ? interval_ : kSweepIntervalWithoutCompaction;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (!stopping_) wake_.WaitWithTimeout(&mu_, period);
      if (stopping_) return;
    }
    if (compacting) CompactOnce();
    if (FirstLiveMember()) SweepOnce().status().IgnoreError();
  }
}

}  // namespace tensord
