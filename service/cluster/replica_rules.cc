#include "service/cluster/replica_rules.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/common/tensor_name.h"

namespace tensord {

absl::StatusOr<std::vector<ReplicaRule>> ParseReplicaRules(absl::string_view text) {
  std::vector<ReplicaRule> rules;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    ReplicaRule rule;
    absl::string_view count = entry;
    if (const size_t equals = entry.rfind('='); equals != absl::string_view::npos) {
      rule.prefix = std::string(entry.substr(0, equals));
      count = entry.substr(equals + 1);
      if (absl::Status valid = ValidateNamePrefix(rule.prefix);
          !valid.ok() || rule.prefix.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("--default-replicas entry '", entry, "': '",
                                                       rule.prefix, "' is not a name prefix"));
      }
    }
    if (!absl::SimpleAtoi(count, &rule.replicas) || rule.replicas < 1 ||
        rule.replicas > kMaxReplicas) {
      return absl::InvalidArgumentError(
          absl::StrCat("--default-replicas entry '", entry, "': copies must be 1..", kMaxReplicas));
    }
    for (const ReplicaRule& earlier : rules) {
      if (earlier.prefix == rule.prefix) {
        return absl::InvalidArgumentError(
            absl::StrCat("--default-replicas gives '", rule.prefix, "' twice"));
      }
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

uint32_t ReplicasByRule(const std::vector<ReplicaRule>& rules, absl::string_view name,
                        uint32_t requested) {
  if (requested != 0) return requested;
  uint32_t replicas = 1;
  size_t longest = 0;
  for (const ReplicaRule& rule : rules) {
    if (absl::StartsWith(name, rule.prefix) && rule.prefix.size() >= longest) {
      longest = rule.prefix.size();
      replicas = rule.replicas;
    }
  }
  return replicas;
}

}  // namespace tensord
