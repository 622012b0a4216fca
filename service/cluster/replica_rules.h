// How many copies a durable put gets: --default-replicas, "N" or
// "PREFIX=N" entries, the longest matching prefix winning.
#ifndef TENSORD_SERVICE_CLUSTER_REPLICA_RULES_H_
#define TENSORD_SERVICE_CLUSTER_REPLICA_RULES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

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

// The copies of `name` when a put asks for `requested` (0: the rules'
// default, 1 without a matching rule).
uint32_t ReplicasByRule(const std::vector<ReplicaRule>& rules, absl::string_view name,
                        uint32_t requested);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_REPLICA_RULES_H_
