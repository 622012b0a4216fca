#include "service/cluster/history_compactor.h"

#include <utility>
#include <vector>

#include "service/common/log.h"

namespace tensord {

HistoryCompactor::HistoryCompactor(std::shared_ptr<KvStore> store, MemberList& members,
                                   std::string self, absl::Duration interval)
    : store_(std::move(store)), members_(members), self_(std::move(self)), interval_(interval) {}

HistoryCompactor::~HistoryCompactor() { Stop(); }

void HistoryCompactor::Start() {
  if (interval_ <= absl::ZeroDuration() || thread_.joinable()) return;
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

bool HistoryCompactor::CompactOnce() {
  // Only the first live member by name; a node that is not listed (its
  // lease lapsed) leaves it to the others.
  const std::vector<ClusterMember> members = members_.members();
  if (members.empty() || members.front().node_name != self_) {
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

void HistoryCompactor::Loop() {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (!stopping_) wake_.WaitWithTimeout(&mu_, interval_);
      if (stopping_) return;
    }
    CompactOnce();
  }
}

}  // namespace tensord
