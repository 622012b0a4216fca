// MemberList: the live members, followed from <prefix>/nodes/<name>
// records. Only a record that decodes and names the node of its key makes
// a member; a member whose lease runs out drops out.
#include "service/cluster/member_list.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/cluster/cluster_membership.h"
#include "service/cluster/memory_kv_store.h"
#include "service/cluster/node_record.h"
#include "service/cluster/rendezvous.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::DeleteKey;
using cluster_test::GatedKvStore;
using cluster_test::PutKey;
using cluster_test::PutMember;
using cluster_test::SampleMember;
using cluster_test::WaitUntil;

constexpr char kPrefix[] = "/t";

std::vector<std::string> Names(const MemberList& members) {
  std::vector<std::string> names;
  for (const ClusterMember& member : members.members()) names.push_back(member.node_name);
  return names;
}

bool AwaitNames(const MemberList& members, const std::vector<std::string>& expected) {
  return WaitUntil([&] { return Names(members) == expected; });
}

TEST(MemberListTest, ReflectsPutsAndDeletesOfNodeRecords) {
  auto store = std::make_shared<MemoryKvStore>();
  PutMember(*store, kPrefix, "node-b");
  PutMember(*store, kPrefix, "node-a");
  MemberList members(store, kPrefix);
  EXPECT_EQ(MemberList::NodesPrefix(kPrefix), "/t/nodes/");
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  EXPECT_EQ(Names(members), (std::vector<std::string>{"node-a", "node-b"}));
  const uint64_t first_generation = members.generation();

  ClusterMember moved = SampleMember("node-c");
  moved.advertise_address = "10.0.0.3:50051";
  PutKey(*store, "/t/nodes/node-c", EncodeNodeRecord(moved));
  ASSERT_TRUE(AwaitNames(members, {"node-a", "node-b", "node-c"})) << Names(members).size();
  std::optional<ClusterMember> found = members.Find("node-c");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, moved);
  EXPECT_GT(members.generation(), first_generation);

  // A record rewritten (a new address) replaces the member's.
  moved.advertise_address = "10.0.0.4:50051";
  PutKey(*store, "/t/nodes/node-c", EncodeNodeRecord(moved));
  ASSERT_TRUE(WaitUntil([&] {
    std::optional<ClusterMember> now = members.Find("node-c");
    return now.has_value() && now->advertise_address == "10.0.0.4:50051";
  }));

  DeleteKey(*store, "/t/nodes/node-a");
  ASSERT_TRUE(AwaitNames(members, {"node-b", "node-c"}));
  EXPECT_FALSE(members.Find("node-a").has_value());
}

// FirstRanked, the cache home found without copying the list, is
// RankMembers' first for every name; none without members.
TEST(MemberListTest, FirstRankedIsRankMembersFirst) {
  auto store = std::make_shared<MemoryKvStore>();
  MemberList members(store, kPrefix);
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  EXPECT_FALSE(members.FirstRanked("kv/0").has_value());
  for (const char* node : {"node-a", "node-b", "node-c", "node-d"})
    PutMember(*store, kPrefix, node);
  ASSERT_TRUE(AwaitNames(members, {"node-a", "node-b", "node-c", "node-d"}));
  std::map<std::string, int> homes;
  for (int i = 0; i < 2000; ++i) {
    const std::string name = absl::StrCat("kv/", i);
    std::optional<ClusterMember> first = members.FirstRanked(name);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(*first, RankMembers(name, members.members(), "", 1).front()) << name;
    ++homes[first->node_name];
  }
  EXPECT_EQ(homes.size(), 4u);  // spread over every member
}

// A key under the prefix trusts nobody unless its record decodes and
// names the node the key names.
TEST(MemberListTest, IgnoresRecordsThatDoNotDecodeOrNameAnotherNode) {
  auto store = std::make_shared<MemoryKvStore>();
  PutMember(*store, kPrefix, "node-a");
  PutKey(*store, "/t/nodes/garbage", "not a record");
  PutKey(*store, "/t/nodes/node-x", EncodeNodeRecord(SampleMember("node-y")));
  PutKey(*store, "/t/nodesX/node-z", EncodeNodeRecord(SampleMember("node-z")));
  PutKey(*store, "/other/nodes/node-w", EncodeNodeRecord(SampleMember("node-w")));
  MemberList members(store, kPrefix);
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  EXPECT_EQ(Names(members), (std::vector<std::string>{"node-a"}));
  EXPECT_FALSE(members.Find("node-y").has_value());
  EXPECT_FALSE(members.Find("node-x").has_value());

  // Later events are judged the same way; a member whose record turns into
  // something else is no longer trusted.
  PutKey(*store, "/t/nodes/node-q", EncodeNodeRecord(SampleMember("node-a")));
  PutKey(*store, "/t/nodes/node-a", "{}");
  const int64_t last = PutMember(*store, kPrefix, "node-ok");
  ASSERT_TRUE(AwaitNames(members, {"node-ok"})) << "members: " << Names(members).size();
  EXPECT_GT(last, 0);
  EXPECT_FALSE(members.Find("node-a").has_value());
  EXPECT_FALSE(members.Find("node-q").has_value());
}

TEST(MemberListTest, DropsAMemberWhenItsLeaseExpires) {
  auto store = std::make_shared<MemoryKvStore>();
  absl::StatusOr<EtcdLease> lease = store->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok());
  PutMember(*store, kPrefix, "node-a", lease->id);
  PutMember(*store, kPrefix, "node-b");
  MemberList members(store, kPrefix);
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  ASSERT_EQ(Names(members), (std::vector<std::string>{"node-a", "node-b"}));
  store->ExpireLease(lease->id);
  EXPECT_TRUE(AwaitNames(members, {"node-b"}));
}

// A lease that ran out while this node was cut off from the store: the
// member is gone once the store is reachable again.
TEST(MemberListTest, AMemberWhoseLeaseRanOutWhileCutOffIsDroppedOnReconnect) {
  auto store = std::make_shared<MemoryKvStore>();
  absl::StatusOr<EtcdLease> lease = store->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok());
  PutMember(*store, kPrefix, "node-a", lease->id);
  PutMember(*store, kPrefix, "node-b");
  MemberList members(store, kPrefix);
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  ASSERT_EQ(Names(members).size(), 2u);
  store->SetReachable(false);
  store->ExpireLease(lease->id);
  absl::SleepFor(absl::Milliseconds(20));  // the watch has ended; no news can come in
  EXPECT_EQ(Names(members).size(), 2u) << "the list changed while the store was unreachable";
  store->SetReachable(true);
  EXPECT_TRUE(AwaitNames(members, {"node-b"}));
}

// Changes while its watch was down, their history then compacted: whether
// it sees them as events or reads the list again, the list ends right.
TEST(MemberListTest, ChangesWhileItsWatchWasDownAreSeenDespiteACompaction) {
  auto store = std::make_shared<MemoryKvStore>();
  PutMember(*store, kPrefix, "node-a");
  PutMember(*store, kPrefix, "node-b");
  MemberList members(store, kPrefix);
  members.Start();
  ASSERT_TRUE(members.AwaitFirstRead(absl::Seconds(10)));
  store->SetReachable(false);  // its watch ends and backs off
  store->SetReachable(true);
  DeleteKey(*store, "/t/nodes/node-a");
  PutMember(*store, kPrefix, "node-c");
  ASSERT_TRUE(store->Compact(store->revision()).ok());
  EXPECT_TRUE(AwaitNames(members, {"node-b", "node-c"}));
}

// A CI failure: a node started while etcd was busy got "no etcd endpoint
// answered within 666ms" for its lease grant and exited, although a slow
// store is one a start waits out (a store that refuses is not).
TEST(ClusterMembershipTest, AJoinWaitsOutAStoreThatAnswersTooSlowly) {
  auto store = std::make_shared<GatedKvStore>(std::make_shared<MemoryKvStore>());
  store->FailGrants(2, KvTimedOut("etcd lease grant: Deadline Exceeded"));
  ClusterMembership membership(store, MembershipOptions{.prefix = kPrefix, .node_name = "node-a"});
  ASSERT_TRUE(membership.Join(SampleMember("node-a"), [](ClusterMember&) {}).ok());
  absl::StatusOr<std::optional<EtcdKeyValue>> record =
      KvGet(*store, std::string(kPrefix) + "/nodes/node-a");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_TRUE(record->has_value());
}

// A TSan run under load: etcd took longer than the lease's TTL between
// granting it and the registration that uses it, which then failed with
// "requested lease not found", and the node exited. A start waits that out.
TEST(ClusterMembershipTest, AJoinWhoseLeaseExpiredBeforeItsRegistrationTriesAgain) {
  auto store = std::make_shared<GatedKvStore>(std::make_shared<MemoryKvStore>());
  store->ExpireGrantedLeases(2);
  ClusterMembership membership(store, MembershipOptions{.prefix = kPrefix, .node_name = "node-a"});
  const absl::Status joined = membership.Join(SampleMember("node-a"), [](ClusterMember&) {});
  ASSERT_TRUE(joined.ok()) << joined;
  absl::StatusOr<std::optional<EtcdKeyValue>> record =
      KvGet(*store, std::string(kPrefix) + "/nodes/node-a");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_TRUE(record->has_value());
}

TEST(ClusterMembershipTest, AJoinFailsAtOnceWhenTheStoreCannotBeReached) {
  auto store = std::make_shared<GatedKvStore>(std::make_shared<MemoryKvStore>());
  store->FailGrants(1, absl::UnavailableError("etcd lease grant: connection refused"));
  ClusterMembership membership(store, MembershipOptions{.prefix = kPrefix, .node_name = "node-a"});
  const absl::Status joined = membership.Join(SampleMember("node-a"), [](ClusterMember&) {});
  EXPECT_EQ(joined.code(), absl::StatusCode::kUnavailable) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "connection refused")) << joined;
}

}  // namespace
}  // namespace tensord
