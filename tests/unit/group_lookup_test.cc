// FindGroupAt: an atomic group of durable names found again by the etcd
// revision that ordered it: by its index key (there while the group is
// whole, whatever etcd compacted), else from etcd's history (a watch from
// that revision), with clear NOT_FOUNDs for revisions that ordered no group.
#include "service/cluster/group_lookup.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/cluster/group_index.h"
#include "service/cluster/memory_kv_store.h"
#include "service/cluster/name_record.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::PutKey;
using cluster_test::PutNameRecord;
using cluster_test::SampleRecord;

constexpr char kPrefix[] = "/t";
constexpr absl::Duration kPatience = absl::Milliseconds(300);

// Writes the records of a group in one transaction, and with
// `indexed` its index key, as the committer does (without: as a group
// whose key is gone, or one written before the index).
int64_t PutGroup(KvStore& store, const std::string& group, const std::vector<std::string>& names,
                 bool indexed = false) {
  std::vector<KvOp> puts;
  for (const std::string& name : names) {
    NameRecord record = SampleRecord(name);
    record.group = group;
    puts.push_back(KvOp::Put(NameRecordKey(kPrefix, name), EncodeNameRecord(record, false)));
  }
  if (indexed) puts.push_back(KvOp::Put(GroupIndexKey(kPrefix, group), EncodeGroupIndex(names)));
  absl::StatusOr<KvTxnResult> written = store.Txn({}, puts, {});
  return written.ok() ? written->revision : -1;
}

// The index answers without history: a whole group is found long after
// etcd compacted the revision that ordered it, and no other revision
// finds it.
TEST(GroupLookupTest, AnIndexedGroupIsFoundByItsRevisionAfterEtcdCompactedIt) {
  MemoryKvStore store;
  const int64_t revision = PutGroup(store, "node-a.g1", {"w/b", "w/a"}, /*indexed=*/true);
  const int64_t other = PutGroup(store, "node-a.g2", {"v/a"}, /*indexed=*/true);
  const int64_t later = PutNameRecord(store, kPrefix, SampleRecord("z"));
  ASSERT_TRUE(store.Compact(later).ok());
  absl::StatusOr<GroupMembers> members = FindGroupAt(store, kPrefix, revision, kPatience);
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_EQ(members->group, "node-a.g1");
  EXPECT_THAT(members->names, ::testing::ElementsAre("w/a", "w/b"));
  absl::StatusOr<GroupMembers> second = FindGroupAt(store, kPrefix, other, kPatience);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->group, "node-a.g2");
  EXPECT_EQ(FindGroupAt(store, kPrefix, later, kPatience).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(GroupLookupTest, TheRecordsWrittenAtAGroupsRevisionAreItsMembersInNameOrder) {
  MemoryKvStore store;
  PutNameRecord(store, kPrefix, SampleRecord("before"));
  const int64_t revision = PutGroup(store, "node-a.g1", {"w/c", "w/a", "w/b"});
  PutGroup(store, "node-a.g2", {"w/a", "w/d"});  // a later group overwrites w/a
  PutNameRecord(store, kPrefix, SampleRecord("after"));
  absl::StatusOr<GroupMembers> members = FindGroupAt(store, kPrefix, revision, kPatience);
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_EQ(members->group, "node-a.g1");
  EXPECT_THAT(members->names, ::testing::ElementsAre("w/a", "w/b", "w/c"));
}

TEST(GroupLookupTest, ARevisionThatWroteNoGroupIsNotFoundSayingWhy) {
  MemoryKvStore store;
  const int64_t single = PutNameRecord(store, kPrefix, SampleRecord("single"));
  const int64_t elsewhere = PutKey(store, "/t/members/node-a", "{}");
  PutNameRecord(store, kPrefix, SampleRecord("later"));

  absl::StatusOr<GroupMembers> outside = FindGroupAt(store, kPrefix, single, kPatience);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(outside.status().message(), "outside any group"))
      << outside.status();

  absl::StatusOr<GroupMembers> none = FindGroupAt(store, kPrefix, elsewhere, kPatience);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "no name record was written"))
      << none.status();

  absl::StatusOr<GroupMembers> future = FindGroupAt(store, kPrefix, single + 100, kPatience);
  EXPECT_EQ(future.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(future.status().message(), "etcd is at revision"))
      << future.status();

  EXPECT_EQ(FindGroupAt(store, kPrefix, 0, kPatience).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A replica joining a group item's holders rewrites its record at a later
// revision, keeping the group and the origin: no group was ordered there.
TEST(GroupLookupTest, ARecordRewrittenWithItsOriginIsNotAGroupAtTheRewrite) {
  MemoryKvStore store;
  const int64_t revision = PutGroup(store, "node-a.g1", {"x", "y"});
  NameRecord joined = SampleRecord("x");
  joined.group = "node-a.g1";
  joined.origin = revision;
  joined.holders.push_back("node-b");
  const int64_t rewrite =
      PutKey(store, NameRecordKey(kPrefix, "x"), EncodeNameRecord(joined, /*with_origin=*/true));
  PutNameRecord(store, kPrefix, SampleRecord("later"));
  absl::StatusOr<GroupMembers> at_rewrite = FindGroupAt(store, kPrefix, rewrite, kPatience);
  EXPECT_EQ(at_rewrite.status().code(), absl::StatusCode::kNotFound) << at_rewrite.status();
  absl::StatusOr<GroupMembers> group = FindGroupAt(store, kPrefix, revision, kPatience);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_THAT(group->names, ::testing::ElementsAre("x", "y"));
}

// Nothing changed since the revision: the watch has no history to replay
// and would wait for the next change; the lookup gives up after its
// patience instead.
TEST(GroupLookupTest, ARevisionWithNoRecordChangesSinceIsAnsweredWithinThePatience) {
  MemoryKvStore store;
  PutNameRecord(store, kPrefix, SampleRecord("first"));
  const int64_t last = PutKey(store, "/t/members/node-a", "{}");
  const absl::Time start = absl::Now();
  absl::StatusOr<GroupMembers> members = FindGroupAt(store, kPrefix, last, kPatience);
  EXPECT_EQ(members.status().code(), absl::StatusCode::kNotFound) << members.status();
  EXPECT_LT(absl::Now() - start, kPatience + absl::Seconds(2));
}

TEST(GroupLookupTest, AGroupOlderThanTheCompactedHistoryIsNotFoundNamingIt) {
  MemoryKvStore store;
  const int64_t revision = PutGroup(store, "node-a.g1", {"x", "y"});
  const int64_t later = PutNameRecord(store, kPrefix, SampleRecord("z"));
  ASSERT_TRUE(store.Compact(later).ok());
  absl::StatusOr<GroupMembers> members = FindGroupAt(store, kPrefix, revision, kPatience);
  EXPECT_EQ(members.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(members.status().message(), "compacted")) << members.status();
}

TEST(GroupLookupTest, AnUnreachableStoreIsUnavailable) {
  MemoryKvStore store;
  const int64_t revision = PutGroup(store, "node-a.g1", {"x", "y"});
  store.SetReachable(false);
  EXPECT_EQ(FindGroupAt(store, kPrefix, revision, kPatience).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tensord
