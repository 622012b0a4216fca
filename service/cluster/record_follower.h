// Follows every change to the cluster's name records (an etcd watch of
// <prefix>/names/ from the revision the node joined at): drops this node's
// copies that a newer version or a delete made stale (they would only hold
// memory: reads ask the record anyway), and feeds cluster watches with
// every durable publish and delete, positioned by etcd revision.
#ifndef TENSORD_SERVICE_CLUSTER_RECORD_FOLLOWER_H_
#define TENSORD_SERVICE_CLUSTER_RECORD_FOLLOWER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "service/cluster/kv_store.h"
#include "service/cluster/latest_reads.h"
#include "service/cluster/prefix_follower.h"
#include "service/registry/change_feed.h"
#include "service/registry/cluster_access.h"

namespace tensord {

// Thread-safe. Lifecycle: construct, Start(), Stop() (or destroy).
class RecordFollower {
 public:
  // `on_gap` runs (on the follower's thread) when etcd compacted revisions
  // the watch had not delivered: stale copies may have been missed.
  RecordFollower(std::shared_ptr<KvStore> store, std::string prefix, LatestReads& latest,
                 size_t history_items, std::function<void()> on_gap);
  ~RecordFollower();

  void Start();
  void Stop();

  ChangeFeed& changes() { return changes_; }
  // A cluster watch's start: ClusterAccess::StartClusterWatch. Blocks (an
  // etcd read in pages when `with_existing`).
  absl::StatusOr<WatchStart> StartWatch(absl::string_view prefix, bool with_existing,
                                        uint64_t from_version, size_t max_existing);
  // Durable names after `after` starting with `prefix`, from etcd. Blocks.
  absl::StatusOr<std::vector<ClusterVersion>> ListNames(absl::string_view prefix,
                                                        absl::string_view after, size_t max_names);

  int64_t revision() const { return follower_->revision(); }
  absl::Status health() const { return follower_->health(); }

 private:
  void Apply(std::vector<EtcdWatchEvent> events);

  const std::shared_ptr<KvStore> store_;
  const std::string prefix_;
  const std::string records_prefix_;
  LatestReads& latest_;
  const std::function<void()> on_gap_;
  ChangeFeed changes_;
  std::unique_ptr<PrefixFollower> follower_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_RECORD_FOLLOWER_H_
