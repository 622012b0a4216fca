#include "service/cluster/replica_rules.h"
#include "gtest/gtest.h"
#include "service/cluster/rendezvous.h"

namespace tensord {
namespace {

TEST(ReplicaRulesTest, ParsesCountsAndPrefixes) {
  absl::StatusOr<std::vector<ReplicaRule>> rules = ParseReplicaRules("model/=3, kv/=1,2");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(*rules, (std::vector<ReplicaRule>{{"model/", 3}, {"kv/", 1}, {"", 2}}));
  EXPECT_TRUE(ParseReplicaRules("").ok());
}

TEST(ReplicaRulesTest, TheLimitAndBadEntriesAreRefusedNamingThem) {
  for (const char* text : {"17", "model/=0", "model/=x", "a b/=2", "a/=2,a/=3"}) {
    absl::StatusOr<std::vector<ReplicaRule>> rules = ParseReplicaRules(text);
    EXPECT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  EXPECT_NE(ParseReplicaRules("17").status().message().find("1..16"), std::string::npos);
  EXPECT_NE(ParseReplicaRules("a/=2,a/=3").status().message().find("'a/' twice"),
            std::string::npos);
}

TEST(ReplicaRulesTest, TargetsAreStableAndSkipThisNode) {
  std::vector<ClusterMember> nodes(4);
  for (int i = 0; i < 4; ++i) nodes[i].node_name = std::string(1, static_cast<char>('a' + i));
  const std::vector<ClusterMember> first = RankMembers("w", nodes, "a", 2);
  ASSERT_EQ(first.size(), 2u);
  for (const ClusterMember& target : first) EXPECT_NE(target.node_name, "a");
  std::vector<ClusterMember> reversed(nodes.rbegin(), nodes.rend());
  const std::vector<ClusterMember> again = RankMembers("w", reversed, "a", 2);
  EXPECT_EQ(again, first) << "the ranking depends on the name and nodes, not their order";
}

TEST(ReplicaRulesTest, TheLongestMatchingPrefixGivesTheDefault) {
  absl::StatusOr<std::vector<ReplicaRule>> rules = ParseReplicaRules("model/=3,model/big/=2,4");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(ReplicasByRule(*rules, "model/x", 0), 3u);
  EXPECT_EQ(ReplicasByRule(*rules, "model/big/x", 0), 2u);
  EXPECT_EQ(ReplicasByRule(*rules, "other", 0), 4u);
  EXPECT_EQ(ReplicasByRule(*rules, "model/x", 1), 1u) << "what a put asks for wins";
  EXPECT_EQ(ReplicasByRule({}, "anything", 0), 1u);
}

}  // namespace
}  // namespace tensord
