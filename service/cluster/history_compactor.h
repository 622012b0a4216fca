// Keeps etcd's history from growing without end: every interval, the
// history older than one interval is compacted away (a watch lagging less
// than that loses nothing; one lagging more reads again). Without it every
// put leaves a revision behind and etcd's backend quota fills up (its
// NOSPACE alarm then refuses every write). Only the live member first by
// name compacts, so the cluster does it once per interval.
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
  HistoryCompactor(std::shared_ptr<KvStore> store, MemberList& members, std::string self,
                   absl::Duration interval);
  ~HistoryCompactor();

  void Start();
  void Stop();
  // One round now: remembers the current revision and compacts to the one
  // remembered last round. Whether it compacted.
  bool CompactOnce();

  int64_t compacted_to() const { return compacted_to_.load(std::memory_order_relaxed); }

 private:
  void Loop();

  const std::shared_ptr<KvStore> store_;
  MemberList& members_;
  const std::string self_;
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
