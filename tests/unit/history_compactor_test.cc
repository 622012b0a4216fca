// HistoryCompactor: each round compacts etcd's history to the revision
// remembered one round earlier (so a watch lagging less than a round loses
// nothing), and only the live member first by name does it.
#include "service/cluster/history_compactor.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/cluster/member_list.h"
#include "service/cluster/memory_kv_store.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::PutKey;
using cluster_test::PutMember;
using cluster_test::WaitUntil;

constexpr char kPrefix[] = "/t";

// Whether the store still holds the history at `revision`.
bool Readable(KvStore& store, int64_t revision) {
  return store.Range("/", KvPrefixEnd("/"), revision, 1).ok();
}

std::vector<std::string> Names(const MemberList& members) {
  std::vector<std::string> names;
  for (const ClusterMember& member : members.members()) names.push_back(member.node_name);
  return names;
}

TEST(HistoryCompactorTest, CompactsToTheRevisionRememberedOneRoundEarlier) {
  auto store = std::make_shared<MemoryKvStore>();
  PutMember(*store, kPrefix, "node-a");
  PutMember(*store, kPrefix, "node-b");
  MemberList members(store, kPrefix);
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  HistoryCompactor compactor(store, members, "node-a", kPrefix, 128, absl::ZeroDuration());

  // The first round only remembers where the store is.
  const int64_t first_round = store->revision();
  EXPECT_FALSE(compactor.CompactOnce());
  EXPECT_EQ(compactor.compacted_to(), 0);
  EXPECT_TRUE(Readable(*store, 1));

  for (int i = 0; i < 5; ++i) PutKey(*store, "/t/names/n", std::to_string(i));
  const int64_t second_round = store->revision();
  EXPECT_TRUE(compactor.CompactOnce());
  EXPECT_EQ(compactor.compacted_to(), first_round);
  EXPECT_FALSE(Readable(*store, first_round - 1));
  EXPECT_TRUE(Readable(*store, first_round));
  EXPECT_TRUE(Readable(*store, first_round + 1)) << "compacted further than remembered";

  // No writes since: the next round compacts to the second round's revision.
  EXPECT_TRUE(compactor.CompactOnce());
  EXPECT_EQ(compactor.compacted_to(), second_round);
  // Then nothing is left to compact.
  EXPECT_FALSE(compactor.CompactOnce());
  EXPECT_EQ(compactor.compacted_to(), second_round);
}

// Only the live member first by name compacts; when it goes, the next one
// takes over (after a round of its own to remember from).
TEST(HistoryCompactorTest, OnlyTheLiveMemberFirstByNameCompacts) {
  auto store = std::make_shared<MemoryKvStore>();
  absl::StatusOr<EtcdLease> lease = store->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok());
  PutMember(*store, kPrefix, "node-b");
  PutMember(*store, kPrefix, "node-a", lease->id);
  MemberList members(store, kPrefix);
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  HistoryCompactor second(store, members, "node-b", kPrefix, 128, absl::ZeroDuration());
  for (int round = 0; round < 3; ++round) {
    EXPECT_FALSE(second.CompactOnce());
    PutKey(*store, "/t/names/n", std::to_string(round));
  }
  EXPECT_EQ(second.compacted_to(), 0);
  EXPECT_TRUE(Readable(*store, 1));

  store->ExpireLease(lease->id);
  ASSERT_TRUE(WaitUntil([&] { return Names(members) == std::vector<std::string>{"node-b"}; }));
  const int64_t remembered = store->revision();
  EXPECT_FALSE(second.CompactOnce());
  PutKey(*store, "/t/names/n", "later");
  EXPECT_TRUE(second.CompactOnce());
  EXPECT_EQ(second.compacted_to(), remembered);
  EXPECT_FALSE(Readable(*store, remembered - 1));
}

TEST(HistoryCompactorTest, AFailedRoundCompactsNothing) {
  auto store = std::make_shared<MemoryKvStore>();
  PutMember(*store, kPrefix, "node-a");
  MemberList members(store, kPrefix);
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  HistoryCompactor compactor(store, members, "node-a", kPrefix, 128, absl::ZeroDuration());
  EXPECT_FALSE(compactor.CompactOnce());
  PutKey(*store, "/t/names/n", "1");
  store->SetReachable(false);
  EXPECT_FALSE(compactor.CompactOnce());
  EXPECT_EQ(compactor.compacted_to(), 0);
  store->SetReachable(true);
  EXPECT_TRUE(Readable(*store, 1));
}

}  // namespace
}  // namespace tensord
