// Replicated puts: a put asking for N copies is acknowledged once this
// node registered it and N-1 other live nodes, chosen by rendezvous hashing
// of the name (so a name's replicas land on the same nodes and names spread
// evenly), pulled and registered a durable copy (their Replicate call).
// Per-prefix defaults come from --default-replicas.
#ifndef TENSORD_SERVICE_CLUSTER_PUT_REPLICATION_H_
#define TENSORD_SERVICE_CLUSTER_PUT_REPLICATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/cluster/cluster_directory.h"
#include "service/cluster/read_through.h"
#include "service/common/cluster_reads.h"
#include "service/common/cluster_view.h"

namespace tensord {

// Most copies a put may ask for.
inline constexpr uint32_t kMaxReplicas = 16;

// A name's default copies: the rule with the longest matching prefix.
struct ReplicaRule {
  std::string prefix;  // empty: every name
  uint32_t replicas = 1;
  bool operator==(const ReplicaRule&) const = default;
};

// Parses --default-replicas: "N" or "PREFIX=N" entries, comma-separated
// (e.g. "model/=3,kv/=1,2"). INVALID_ARGUMENT naming the bad entry.
absl::StatusOr<std::vector<ReplicaRule>> ParseReplicaRules(absl::string_view text);

struct PutReplicationOptions {
  std::vector<ReplicaRule> defaults;
  // How long an acknowledgement waits for the directory to register a put.
  absl::Duration register_timeout = absl::Seconds(3);
  // Deadline of one Replicate call (the pull of the whole version).
  absl::Duration replicate_timeout = absl::Minutes(5);
  // The live members read from etcd now, for when the list the membership
  // keeps (reread every TTL/3) has too few: a node that just joined.
  std::function<absl::StatusOr<std::vector<ClusterMember>>()> read_members;
};

// Thread-safe.
class PutReplication {
 public:
  using Done = ClusterReads::Done;
  // `read_through` must outlive this, and its threads must be joined
  // before this is destroyed (they run Replicate's jobs).
  PutReplication(std::shared_ptr<ClusterDirectory> directory, ReadThrough& read_through,
                 std::shared_ptr<const ClusterView> members, Registry& registry,
                 PutReplicationOptions options);

  absl::StatusOr<uint32_t> ReplicasFor(absl::string_view name, uint32_t requested) const;
  void AfterPut(std::string name, uint64_t version, uint32_t replicas, Done done);
  void Replicate(ClusterVersion source, Done done);

  // The `count` nodes other than this one that hold `name`'s replicas, by
  // rendezvous hashing over `nodes` (stable across processes).
  static std::vector<ClusterMember> ChooseTargets(absl::string_view name,
                                                  std::vector<ClusterMember> nodes,
                                                  absl::string_view self, size_t count);

 private:
  void SendReplicas(std::string name, uint64_t version, uint32_t replicas, Done done);
  // The live members, reread from etcd when the kept list has fewer than `needed`.
  std::vector<ClusterMember> LiveMembers(size_t needed) const;

  const std::shared_ptr<ClusterDirectory> directory_;
  ReadThrough& read_through_;
  const std::shared_ptr<const ClusterView> members_;
  Registry& registry_;
  const PutReplicationOptions options_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_PUT_REPLICATION_H_
