// The parts of one cluster node that decide from etcd's records alone
// (a registry, the record reader and committer, the member list, latest
// reads, cluster writes), built on a MemoryKvStore for unit tests. Peer
// channels are made but never used to connect: the tests keep every
// decision on this node.
#ifndef TENSORD_TESTS_UNIT_CLUSTER_NODE_PARTS_H_
#define TENSORD_TESTS_UNIT_CLUSTER_NODE_PARTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/cluster/cache_copies.h"
#include "service/cluster/cluster_writes.h"
#include "service/cluster/latest_reads.h"
#include "service/cluster/member_list.h"
#include "service/cluster/memory_kv_store.h"
#include "service/cluster/peer_channels.h"
#include "service/cluster/record_committer.h"
#include "service/cluster/record_reader.h"
#include "service/cluster/work_pool.h"
#include "service/registry/registry.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace cluster_test {

inline constexpr char kClusterPrefix[] = "/t";

inline dlpack::TensorLayout FloatVector(int64_t n) {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kFloat, 32, 1};
  layout.shape = {n};
  return layout;
}

// Publishes `n` floats equal to `fill` as `name`, with `origin` (0: a
// version no record orders) and `retention`.
inline absl::StatusOr<VersionInfo> PublishLocal(Registry& registry, const std::string& name,
                                                int64_t n, float fill, int64_t origin,
                                                Retention retention = Retention::kDefault) {
  absl::StatusOr<PendingVersion> pending =
      registry.Prepare(name, FloatVector(n), static_cast<uint64_t>(n) * 4, retention);
  if (!pending.ok()) return pending.status();
  const std::vector<float> values(static_cast<size_t>(n), fill);
  if (absl::Status written = pending->buffer->Write(0, values.data(), values.size() * 4);
      !written.ok()) {
    return written;
  }
  pending->origin = origin;
  return registry.Publish(*std::move(pending));
}

class ClusterNodeParts {
 public:
  // `self` is registered as a member when `register_self`.
  explicit ClusterNodeParts(std::string self, bool register_self = true)
      : self_(std::move(self)),
        store_(std::make_shared<MemoryKvStore>()),
        registry_(RegistryOptions{}) {
    if (register_self) PutMember(*store_, kClusterPrefix, self_);
    members_ = std::make_unique<MemberList>(store_, kClusterPrefix);
    members_->Start();
    members_ready_ = members_->AwaitFirstRead(absl::Seconds(10));
    peers_ = std::make_unique<PeerChannels>(PeerChannelOptions{});
    reader_ = std::make_unique<RecordReader>(store_, RecordReaderOptions{.prefix = kClusterPrefix});
    committer_ =
        std::make_unique<RecordCommitter>(store_, RecordCommitterOptions{.prefix = kClusterPrefix});
    CacheCopiesOptions cache_options;
    cache_options.self = self_;
    cache_copies_ = std::make_unique<CacheCopies>(cache_options, registry_, *members_, *peers_);
    pool_ = std::make_unique<WorkPool>(2);
    latest_ = std::make_unique<LatestReads>(
        self_, registry_, *reader_, *members_, *peers_, *pool_,
        [this](const std::string& name) -> absl::StatusOr<CopyLocation> {
          locate_calls_.fetch_add(1);
          return absl::NotFoundError("no node announced a copy of '" + name + "'");
        },
        [this](const std::string& name, int64_t origin) {
          return writes_->JoinHolders(name, origin);
        });
    ClusterWritesOptions write_options;
    write_options.self = self_;
    write_options.prefix = kClusterPrefix;
    writes_ = std::make_unique<ClusterWrites>(write_options, registry_, store_, *committer_,
                                              *members_, *peers_, *pool_, *cache_copies_, *latest_);
  }

  // In ClusterNode's order: nothing running reaches what is gone.
  ~ClusterNodeParts() {
    peers_->CancelAll();
    reader_.reset();
    committer_.reset();
    pool_.reset();
    cache_copies_.reset();
    writes_.reset();
    latest_.reset();
    peers_.reset();
    members_->Stop();
    members_.reset();
  }

  const std::string& self() const { return self_; }
  MemoryKvStore& store() { return *store_; }
  Registry& registry() { return registry_; }
  RecordReader& reader() { return *reader_; }
  MemberList& members() { return *members_; }
  LatestReads& latest() { return *latest_; }
  ClusterWrites& writes() { return *writes_; }
  bool members_ready() const { return members_ready_; }
  // Calls of the cache-copy lookup (the name's home asked).
  int locate_calls() const { return locate_calls_.load(); }

 private:
  const std::string self_;
  const std::shared_ptr<MemoryKvStore> store_;
  Registry registry_;
  bool members_ready_ = false;
  std::atomic<int> locate_calls_{0};
  std::unique_ptr<MemberList> members_;
  std::unique_ptr<PeerChannels> peers_;
  std::unique_ptr<RecordReader> reader_;
  std::unique_ptr<RecordCommitter> committer_;
  std::unique_ptr<CacheCopies> cache_copies_;
  std::unique_ptr<WorkPool> pool_;
  std::unique_ptr<LatestReads> latest_;
  std::unique_ptr<ClusterWrites> writes_;
};

}  // namespace cluster_test
}  // namespace tensord

#endif  // TENSORD_TESTS_UNIT_CLUSTER_NODE_PARTS_H_
