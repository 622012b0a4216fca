// Follows the keys under an etcd prefix on a thread of its own: optionally
// reads them first (in pages, so no answer grows with the prefix), then
// watches from the revision read, resuming a broken watch after the last
// revision it delivered (etcd keeps the history), and starting over when
// etcd compacted the revisions it needed.
#ifndef TENSORD_SERVICE_CLUSTER_PREFIX_FOLLOWER_H_
#define TENSORD_SERVICE_CLUSTER_PREFIX_FOLLOWER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "service/cluster/kv_store.h"
#include "service/common/episode_log.h"
#include "service/common/mutex.h"

namespace tensord {

struct PrefixFollowerCallbacks {
  // With `read_first`: every key under the prefix as of `revision`, at the
  // start and after etcd compacted revisions the watch still needed. The
  // events that follow are those after `revision`.
  std::function<void(std::vector<EtcdKeyValue> keys, int64_t revision)> on_read;
  // Without `read_first`: the watch starts at the store's current revision,
  // `resumed_at`; events after `missed_after` up to it were not seen (0 at
  // the start, the last delivered revision after a compaction gap).
  std::function<void(int64_t missed_after, int64_t resumed_at)> on_gap;
  // The events of one revision, in order.
  std::function<void(std::vector<EtcdWatchEvent> events)> on_events;
};

// Thread-safe. Lifecycle: construct, Start(), Stop() (or destroy).
class PrefixFollower {
 public:
  // `what` names the follower in logs ("cluster members").
  PrefixFollower(std::shared_ptr<KvStore> store, std::string prefix, bool read_first,
                 std::string what, PrefixFollowerCallbacks callbacks);
  ~PrefixFollower();
  PrefixFollower(const PrefixFollower&) = delete;
  PrefixFollower& operator=(const PrefixFollower&) = delete;

  void Start();
  void Stop();

  // The revision the callbacks are current as of (0 before the first read).
  int64_t revision() const;
  // Blocks until revision() >= `revision` or `timeout` passes; whether it got there.
  bool AwaitRevision(int64_t revision, absl::Duration timeout) const;
  // OK while the follower is current; why not otherwise (etcd out of reach).
  absl::Status health() const;

 private:
  void Loop();
  absl::Status FollowOnce(bool& need_read);

  const std::shared_ptr<KvStore> store_;
  const std::string prefix_;
  const bool read_first_;
  const std::string what_;
  const PrefixFollowerCallbacks callbacks_;
  EpisodeLog log_;

  mutable Mutex mu_;
  mutable CondVar moved_;
  static constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_) = kFirstBackoff;
  absl::Status health_ ABSL_GUARDED_BY(mu_) = absl::UnavailableError("not started");
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  KvWatchCancel cancel_;
  std::thread thread_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_PREFIX_FOLLOWER_H_
