// Keeps etcd from growing without end. Every interval, the history older
// than one interval is compacted away (a watch lagging less than that loses
// nothing; one lagging more reads again): without it every put leaves a
// revision behind and etcd's backend quota fills up (its NOSPACE alarm then
// refuses every write). And the group index is swept of groups no longer
// whole (group_index.h), whose keys a node that died between breaking a
// group and removing its key left behind. Only the live member first by
// name does either, so the cluster does it once per interval.
#ifndef TENSORD_SERVICE_CLUSTER_HISTORY_COMPACTOR_H_
#define TENSORD_SERVICE_CLUSTER_HISTORY_COMPACTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "service/cluster/kv_store.h"
#include "service/cluster/member_list.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe. Lifecycle: construct, Start(), Stop() (or destroy).
class HistoryCompactor {
 public:
  // `interval` 0: etcd compacts its history itself; the group index is
  // still swept, every kSweepIntervalWithoutCompaction.
  HistoryCompactor(std::shared_ptr<KvStore> store, MemberList& members, std::string self,
                   std::string prefix, size_t max_txn_ops, absl::Duration interval);
  ~HistoryCompactor();

  void Start();
  void Stop();
  // One round now: remembers the current revision and compacts to the one
  // remembered last round. Whether it compacted.
  bool CompactOnce();
  // One sweep of the group index now, whichever member this is: the index
  // keys removed.
  absl::StatusOr<size_t> SweepOnce();

  static constexpr absl::Duration kSweepIntervalWithoutCompaction = absl::Minutes(5);

  int64_t compacted_to() const { return compacted_to_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  bool FirstLiveMember() const;

  const std::shared_ptr<KvStore> store_;
  MemberList& members_;
  const std::string self_;
  const std::string prefix_;
  const size_t max_txn_ops_;
  const absl::Duration interval_;
  int64_t remembered_ = 0;  // touched by the loop's thread (or CompactOnce's caller)
  std::atomic<int64_t> compacted_to_{0};
  Mutex mu_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_HISTORY_COMPACTOR_H_
