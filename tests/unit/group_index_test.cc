// The group index (group_index.h): one etcd key per whole atomic group,
// created in the group's transaction, found by that revision whatever etcd
// compacted, and removed once the group breaks: by the commit that broke
// it, or by the sweep when a node died in between.
#include "service/cluster/group_index.h"

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/cluster/group_lookup.h"
#include "service/cluster/memory_kv_store.h"
#include "service/cluster/name_record.h"
#include "service/cluster/record_committer.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::DeleteKey;
using cluster_test::PutKey;
using cluster_test::PutNameRecord;
using cluster_test::SampleRecord;
using cluster_test::WaitUntil;
using ::testing::ElementsAre;

constexpr char kPrefix[] = "/t";
constexpr absl::Duration kPatience = absl::Milliseconds(300);

absl::StatusOr<RecordCommitted> CommitNow(RecordCommitter& committer,
                                          std::vector<RecordChange> changes) {
  auto answered = std::make_shared<std::promise<absl::StatusOr<RecordCommitted>>>();
  std::future<absl::StatusOr<RecordCommitted>> answer = answered->get_future();
  committer.Commit(std::move(changes), [answered](absl::StatusOr<RecordCommitted> got) {
    answered->set_value(std::move(got));
  });
  if (answer.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return absl::DeadlineExceededError("the commit was not answered");
  }
  return answer.get();
}

// An atomic group as ClusterWrites::CommitGroup hands it to the committer:
// a record per member, the index key riding on the first.
std::vector<RecordChange> GroupChanges(const std::string& group,
                                       const std::vector<std::string>& names) {
  std::vector<RecordChange> changes;
  for (const std::string& name : names) {
    NameRecord record = SampleRecord(name);
    record.group = group;
    changes.push_back(RecordChange{.name = name, .record = record});
  }
  changes.front().also.push_back(KvOp::Put(GroupIndexKey(kPrefix, group), EncodeGroupIndex(names)));
  return changes;
}

bool Indexed(KvStore& store, const std::string& group) {
  absl::StatusOr<std::optional<EtcdKeyValue>> kv = KvGet(store, GroupIndexKey(kPrefix, group));
  EXPECT_TRUE(kv.ok()) << kv.status();
  return kv.ok() && kv->has_value();
}

TEST(GroupIndexTest, AnIndexKeyRoundTripsInNameOrderAndOnlyWhatTensordWritesParses) {
  EtcdKeyValue kv{.key = GroupIndexKey(kPrefix, "node-a.1.g3"),
                  .value = EncodeGroupIndex({"w/c", "w/a", "w/b"}),
                  .create_revision = 7,
                  .mod_revision = 7};
  absl::StatusOr<GroupMembers> members = DecodeGroupIndex(kPrefix, kv);
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_EQ(members->group, "node-a.1.g3");
  EXPECT_THAT(members->names, ElementsAre("w/a", "w/b", "w/c"));

  auto refused = [&](std::string key, std::string value) {
    absl::StatusOr<GroupMembers> decoded =
        DecodeGroupIndex(kPrefix, EtcdKeyValue{.key = key, .value = value});
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << key << " = " << value;
    return decoded.status();
  };
  const std::string good_key = GroupIndexKey(kPrefix, "g");
  EXPECT_TRUE(absl::StrContains(refused("/t/names/g", "{\"names\":[\"a\"]}").message(),
                                "outside the index"));
  (void)refused(GroupIndexKey(kPrefix, ""), "{\"names\":[\"a\"]}");
  (void)refused(GroupIndexKey(kPrefix, "g/h"), "{\"names\":[\"a\"]}");
  (void)refused(good_key, "not json");
  (void)refused(good_key, "{\"names\":[]}");
  (void)refused(good_key, "{\"names\":\"a\"}");
  (void)refused(good_key, "{\"names\":[\"/absolute\"]}");
  (void)refused(good_key, "{\"names\":[7]}");
  EXPECT_TRUE(absl::StrContains(refused(good_key, "{\"names\":[\"a\",\"b\",\"a\"]}").message(),
                                "listed twice"));
}

TEST(GroupIndexTest, ATransactionBreaksTheGroupsOfTheRecordsItReplacedButNotItsOwn) {
  NameRecord in_g1 = SampleRecord("x");
  in_g1.group = "g1";
  NameRecord in_g2 = SampleRecord("y");
  in_g2.group = "g2";
  NameRecord alone = SampleRecord("z");
  auto kv = [](const NameRecord& record) {
    return EtcdKeyValue{.key = NameRecordKey(kPrefix, record.name),
                        .value = EncodeNameRecord(record, /*with_origin=*/false),
                        .mod_revision = 5};
  };
  const std::vector<EtcdKeyValue> replaced = {
      kv(in_g1), kv(in_g2), kv(alone), kv(in_g1),
      EtcdKeyValue{.key = NameRecordKey(kPrefix, "bad"), .value = "not json"}};
  EXPECT_THAT(GroupsBrokenBy(kPrefix, replaced, {}), ElementsAre("g1", "g2"));
  EXPECT_THAT(GroupsBrokenBy(kPrefix, replaced, {"g2"}), ElementsAre("g1"));
}

// The committer removes a group's key right after the transaction that
// overwrote or deleted one of its members; a group rewritten by a later
// group of the same names loses its key to the new one's.
TEST(GroupIndexTest, TheCommitThatBreaksAGroupRemovesItsIndexKey) {
  auto store = std::make_shared<MemoryKvStore>();
  RecordCommitter committer(store, RecordCommitterOptions{.prefix = kPrefix});
  absl::StatusOr<RecordCommitted> first = CommitNow(committer, GroupChanges("g1", {"a", "b"}));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<RecordCommitted> second = CommitNow(committer, GroupChanges("g2", {"c", "d"}));
  ASSERT_TRUE(second.ok()) << second.status();
  absl::StatusOr<RecordCommitted> third = CommitNow(committer, GroupChanges("g3", {"e", "f"}));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(Indexed(*store, "g1"));

  // A single put over a member of g1.
  ASSERT_TRUE(CommitNow(committer, {RecordChange{.name = "a", .record = SampleRecord("a")}}).ok());
  // A delete of a member of g2.
  ASSERT_TRUE(CommitNow(committer, {RecordChange{.name = "d"}}).ok());
  // A new group over g3's names.
  ASSERT_TRUE(CommitNow(committer, GroupChanges("g4", {"e", "f"})).ok());
  // A put of a name in no group.
  ASSERT_TRUE(CommitNow(committer, {RecordChange{.name = "z", .record = SampleRecord("z")}}).ok());

  // The removal follows the answer.
  EXPECT_TRUE(WaitUntil([&] { return committer.group_index_keys_removed() == 3; }));
  EXPECT_FALSE(Indexed(*store, "g1"));
  EXPECT_FALSE(Indexed(*store, "g2"));
  EXPECT_FALSE(Indexed(*store, "g3"));
  EXPECT_TRUE(Indexed(*store, "g4"));
}

// A node that died between breaking a group and removing its key left the
// key behind: the sweep removes it, and keeps whole groups, a member whose
// record was rewritten with its own origin (a replica joining) included.
TEST(GroupIndexTest, TheSweepRemovesTheKeysOfGroupsNoLongerWholeOnly) {
  MemoryKvStore store;
  auto put_group = [&](const std::string& group, const std::vector<std::string>& names) {
    std::vector<KvOp> ops;
    for (const std::string& name : names) {
      NameRecord record = SampleRecord(name);
      record.group = group;
      ops.push_back(KvOp::Put(NameRecordKey(kPrefix, name), EncodeNameRecord(record, false)));
    }
    ops.push_back(KvOp::Put(GroupIndexKey(kPrefix, group), EncodeGroupIndex(names)));
    absl::StatusOr<KvTxnResult> written = store.Txn({}, ops, {});
    EXPECT_TRUE(written.ok()) << written.status();
    return written.ok() ? written->revision : 0;
  };
  const int64_t whole = put_group("whole", {"w1", "w2", "w3"});
  put_group("overwritten", {"o1", "o2"});
  put_group("deleted", {"d1", "d2"});
  put_group("joined", {"j1"});
  // Broken behind the committer's back.
  PutNameRecord(store, kPrefix, SampleRecord("o2"));
  DeleteKey(store, NameRecordKey(kPrefix, "d1"));
  // A replica joins j1's holders: same group, same origin.
  absl::StatusOr<std::optional<EtcdKeyValue>> j1 = KvGet(store, NameRecordKey(kPrefix, "j1"));
  ASSERT_TRUE(j1.ok() && j1->has_value());
  absl::StatusOr<NameRecord> joined = DecodeNameRecord(kPrefix, **j1);
  ASSERT_TRUE(joined.ok()) << joined.status();
  joined->holders.push_back("node-b");
  PutKey(store, NameRecordKey(kPrefix, "j1"), EncodeNameRecord(*joined, /*with_origin=*/true));

  // Two members' records per read transaction.
  absl::StatusOr<size_t> removed = SweepBrokenGroups(store, kPrefix, 2);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2u);
  EXPECT_TRUE(Indexed(store, "whole"));
  EXPECT_TRUE(Indexed(store, "joined"));
  EXPECT_FALSE(Indexed(store, "overwritten"));
  EXPECT_FALSE(Indexed(store, "deleted"));
  // Nothing more to do; and the whole group is still found by its revision.
  EXPECT_EQ(SweepBrokenGroups(store, kPrefix, 2).value_or(99), 0u);
  absl::StatusOr<GroupMembers> found = FindGroupAt(store, kPrefix, whole, kPatience);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(found->names, ElementsAre("w1", "w2", "w3"));

  store.SetReachable(false);
  EXPECT_EQ(SweepBrokenGroups(store, kPrefix, 2).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tensord
