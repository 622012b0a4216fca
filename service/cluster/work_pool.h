// Threads for the cluster's blocking work (pulls from other nodes, replica
// copies), so no gRPC callback thread or handoff event loop ever waits on
// another node or on etcd.
#ifndef TENSORD_SERVICE_CLUSTER_WORK_POOL_H_
#define TENSORD_SERVICE_CLUSTER_WORK_POOL_H_

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe.
class WorkPool {
 public:
  using Work = absl::AnyInvocable<void() &&>;
  explicit WorkPool(size_t threads);
  // Stops taking work, runs `abandon` of what never started, joins.
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Runs `work` on a pool thread in turn; `abandon` instead (inline) when
  // the pool is stopping, so its caller still hears back.
  void Run(Work work, Work abandon);

  // Waiting jobs (for metrics).
  size_t queued() const;

 private:
  struct Job {
    Work work;
    Work abandon;
  };
  void Loop();

  mutable Mutex mu_;
  CondVar ready_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_WORK_POOL_H_
