// Where cache copies are, without an etcd write per copy: a cache name
// hashes (rendezvous, over the live members) to a home node; a node that
// took a cache put announces its copy to the home, in batches, off the put's
// path; a reader that misses asks the home. Cache names promise misses,
// never wrong bytes: the announcement carries the size and CRC-32C the
// copy is checked against, and a home that restarted, a copy evicted or a
// membership change just misses.
#ifndef TENSORD_SERVICE_CLUSTER_CACHE_COPIES_H_
#define TENSORD_SERVICE_CLUSTER_CACHE_COPIES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "service/cluster/member_list.h"
#include "service/cluster/peer_channels.h"
#include "service/common/mutex.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"

namespace tensord {

struct CacheCopiesOptions {
  std::string self;
  // Places a home keeps; the oldest go first (a forgotten place is a miss).
  size_t max_locations = 1'000'000;
  // Announcements waiting to be sent; more are dropped (misses, counted).
  size_t max_queued = 1'000'000;
  // Most places per AnnounceCopies call.
  size_t batch = 4096;
};

// Thread-safe. Everything it is given must outlive it.
class CacheCopies {
 public:
  CacheCopies(CacheCopiesOptions options, Registry& registry, MemberList& members,
              PeerChannels& peers);
  ~CacheCopies();
  CacheCopies(const CacheCopies&) = delete;
  CacheCopies& operator=(const CacheCopies&) = delete;

  // After a cache put was installed here: its home hears of it soon.
  void Announce(const VersionInfo& info);
  // As the home: places other nodes announced.
  void Remember(std::vector<CopyLocation> copies);
  // As the home: where a copy of `name` is (this node's own included).
  absl::StatusOr<CopyLocation> Find(absl::string_view name) const;
  // As a reader: asks `name`'s home where a copy is. Blocks (pool thread).
  absl::StatusOr<CopyLocation> Locate(const std::string& name);

  size_t locations() const;
  uint64_t dropped_announcements() const;

 private:
  void SendLoop();
  // The home node of `name` among the live members (may be this node).
  std::optional<ClusterMember> HomeOf(absl::string_view name) const;

  const CacheCopiesOptions options_;
  Registry& registry_;
  MemberList& members_;
  PeerChannels& peers_;

  mutable Mutex mu_;
  CondVar queued_cv_;
  // To send, by home node.
  std::map<std::string, std::vector<CopyLocation>> outgoing_ ABSL_GUARDED_BY(mu_);
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // As a home: name -> place, and the order they came in (for the bound).
  absl::flat_hash_map<std::string, CopyLocation> places_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> arrival_ ABSL_GUARDED_BY(mu_);
  std::thread sender_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_CACHE_COPIES_H_
