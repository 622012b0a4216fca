// LatestReads::EnsureLatest, the read path's one decision, against name
// records in a MemoryKvStore: a cache copy is served without etcd; an
// ordered copy only while it has the record's origin (or a newer one); no
// record drops an ordered copy; a record no live member can serve is
// UNAVAILABLE, never an older version. No test here reaches another node.
#include "service/cluster/latest_reads.h"

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/cluster/name_record.h"
#include "tests/unit/cluster_node_parts.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::ClusterNodeParts;
using cluster_test::kClusterPrefix;
using cluster_test::PublishLocal;
using cluster_test::PutKey;
using cluster_test::PutNameRecord;
using cluster_test::SampleRecord;

// The leases EnsureLatest answers, waited for.
std::vector<absl::StatusOr<Lease>> LeasesNow(LatestReads& latest, std::vector<std::string> names) {
  auto answered = std::make_shared<std::promise<std::vector<absl::StatusOr<Lease>>>>();
  std::future<std::vector<absl::StatusOr<Lease>>> answers = answered->get_future();
  latest.EnsureLatest(std::move(names), [answered](std::vector<absl::StatusOr<Lease>> leases) {
    answered->set_value(std::move(leases));
  });
  if (answers.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "EnsureLatest did not answer";
    return {};
  }
  return answers.get();
}

// Only whether each name got a lease, and why not.
std::vector<absl::Status> EnsureLatestNow(LatestReads& latest, std::vector<std::string> names) {
  std::vector<absl::Status> statuses;
  for (const absl::StatusOr<Lease>& lease : LeasesNow(latest, std::move(names))) {
    statuses.push_back(lease.status());
  }
  return statuses;
}

int64_t OriginHere(Registry& registry, const std::string& name) {
  absl::StatusOr<VersionInfo> info = registry.Stat(name, 0);
  return info.ok() ? info->origin : -1;
}

class LatestReadsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(node_.members_ready()); }
  ClusterNodeParts node_{"node-a"};
};

// A cache copy nobody ordered is served as it is: no etcd read, so even
// with etcd out of reach.
TEST_F(LatestReadsTest, ACacheCopyIsServedWithoutReadingTheStore) {
  ASSERT_TRUE(PublishLocal(node_.registry(), "kv/block", 4, 1.0f, 0, Retention::kCache).ok());
  node_.store().SetReachable(false);
  const std::vector<absl::Status> answers = EnsureLatestNow(node_.latest(), {"kv/block"});
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].ok()) << answers[0];
  EXPECT_EQ(node_.reader().transactions(), 0u);
}

TEST_F(LatestReadsTest, ALocalCopyWithTheRecordsOriginOrANewerOneIsServed) {
  const int64_t origin = PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("w", "node-a"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "w", 16, 1.0f, origin).ok());
  std::vector<absl::Status> answers = EnsureLatestNow(node_.latest(), {"w"});
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].ok()) << answers[0];
  EXPECT_EQ(node_.reader().transactions(), 1u);  // the record was read
  EXPECT_EQ(OriginHere(node_.registry(), "w"), origin);

  // A copy ordered after the record read (a put that raced the read) is as good.
  const int64_t older_record =
      PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("v", "node-b"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "v", 16, 1.0f, older_record + 10).ok());
  answers = EnsureLatestNow(node_.latest(), {"v"});
  EXPECT_TRUE(answers[0].ok()) << answers[0];
  EXPECT_EQ(node_.latest().stats().pulls, 0u);
}

// The name's record is gone (deleted elsewhere): the ordered copy here is
// dropped and the read misses, after the name's home was asked for a cache copy.
TEST_F(LatestReadsTest, NoRecordDropsAnOrderedCopyAndTheReadMisses) {
  ASSERT_TRUE(PublishLocal(node_.registry(), "deleted", 16, 1.0f, /*origin=*/7).ok());
  const std::vector<absl::Status> answers = EnsureLatestNow(node_.latest(), {"deleted"});
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kNotFound) << answers[0];
  EXPECT_NE(answers[0].message().find("'deleted'"), std::string::npos) << answers[0];
  EXPECT_EQ(node_.registry().Stat("deleted", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(node_.latest().stats().stale_copies_dropped, 1u);
  EXPECT_EQ(node_.locate_calls(), 1);
}

TEST_F(LatestReadsTest, AnUnreachableStoreIsUnavailableAndDropsNothing) {
  ASSERT_TRUE(PublishLocal(node_.registry(), "held", 16, 1.0f, /*origin=*/5).ok());
  node_.store().SetReachable(false);
  const std::vector<absl::Status> answers = EnsureLatestNow(node_.latest(), {"held", "absent"});
  ASSERT_EQ(answers.size(), 2u);
  for (const absl::Status& answer : answers) {
    EXPECT_EQ(answer.code(), absl::StatusCode::kUnavailable) << answer;
  }
  EXPECT_NE(answers[0].message().find("'held'"), std::string::npos) << answers[0];
  EXPECT_EQ(OriginHere(node_.registry(), "held"), 5);
  EXPECT_EQ(node_.locate_calls(), 0);
}

// A record tensord did not write says nothing about which copy is the
// latest: UNAVAILABLE, not a guess.
TEST_F(LatestReadsTest, AnUndecodableRecordIsUnavailable) {
  PutKey(node_.store(), NameRecordKey(kClusterPrefix, "odd"), "{\"writer\":1}");
  ASSERT_TRUE(PublishLocal(node_.registry(), "odd", 16, 1.0f, /*origin=*/1).ok());
  const std::vector<absl::Status> answers = EnsureLatestNow(node_.latest(), {"odd"});
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kUnavailable) << answers[0];
}

// The record's only holder is not a live member: no node is asked (it is
// not trusted), the older copy here is not served, and the answer names
// the name and the holder.
TEST_F(LatestReadsTest, ARecordWhoseHoldersAreNotLiveMembersIsUnavailableNamingThem) {
  const int64_t older = PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("m", "node-a"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "m", 16, 1.0f, older).ok());
  const int64_t origin =
      PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("m", "node-gone"));
  const std::vector<absl::Status> answers = EnsureLatestNow(node_.latest(), {"m"});
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kUnavailable) << answers[0];
  EXPECT_NE(answers[0].message().find("'m'"), std::string::npos) << answers[0];
  EXPECT_NE(answers[0].message().find("node-gone: not a live member"), std::string::npos)
      << answers[0];
  EXPECT_NE(answers[0].message().find(std::to_string(origin)), std::string::npos) << answers[0];
  // Nothing was pulled and the older copy was not made the latest.
  EXPECT_EQ(node_.latest().stats().pulls, 0u);
  EXPECT_EQ(node_.latest().stats().pull_failures, 0u);
  EXPECT_EQ(OriginHere(node_.registry(), "m"), older);
}

// This node is the record's only holder but lost its copy (a restart
// without a snapshot): it must not claim to serve it.
TEST_F(LatestReadsTest, ARecordNamingOnlyThisNodeWithoutItsCopyIsUnavailable) {
  PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("lost", "node-a"));
  const std::vector<absl::Status> answers = EnsureLatestNow(node_.latest(), {"lost"});
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kUnavailable) << answers[0];
  EXPECT_NE(answers[0].message().find("node-a: this node"), std::string::npos) << answers[0];
}

TEST_F(LatestReadsTest, AnswersEachNameInOrder) {
  ASSERT_TRUE(PublishLocal(node_.registry(), "cache", 4, 1.0f, 0, Retention::kCache).ok());
  const int64_t origin = PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("held"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "held", 4, 1.0f, origin).ok());
  PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("elsewhere", "node-gone"));
  const std::vector<absl::Status> answers =
      EnsureLatestNow(node_.latest(), {"missing", "cache", "elsewhere", "held"});
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kNotFound) << answers[0];
  EXPECT_TRUE(answers[1].ok()) << answers[1];
  EXPECT_EQ(answers[2].code(), absl::StatusCode::kUnavailable) << answers[2];
  EXPECT_TRUE(answers[3].ok()) << answers[3];
}

// The answer is a lease on the version the record confirmed: a read keeps
// serving exactly it even when a newer version replaces it (or a record
// event drops it) before the read is served. Dropping it in that window
// used to turn a read into NOT_FOUND.
TEST_F(LatestReadsTest, TheLeaseKeepsTheConfirmedVersionWhenItIsReplaced) {
  const int64_t origin = PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("r", "node-a"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "r", 16, 1.0f, origin).ok());
  std::vector<absl::StatusOr<Lease>> leases = LeasesNow(node_.latest(), {"r"});
  ASSERT_EQ(leases.size(), 1u);
  ASSERT_TRUE(leases[0].ok()) << leases[0].status();
  const uint64_t confirmed = (*leases[0])->version;
  EXPECT_EQ((*leases[0])->origin.load(), origin);
  // A newer record drops the copy from the registry.
  EXPECT_TRUE(node_.latest().DropStaleCopy("r", origin + 5));
  EXPECT_EQ(node_.registry().Stat("r", 0).status().code(), absl::StatusCode::kNotFound);
  // The leased version is still found by its number, bytes and all.
  absl::StatusOr<Lease> again = node_.registry().Acquire("r", confirmed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->total_bytes, (*leases[0])->total_bytes);
}

// ClusterAccess's contract: inline when nothing must be asked, so no names
// is answered at once with no statuses.
TEST_F(LatestReadsTest, NoNamesAreAnsweredAtOnce) {
  bool answered = false;
  node_.latest().EnsureLatest({}, [&answered](std::vector<absl::StatusOr<Lease>> leases) {
    answered = true;
    EXPECT_TRUE(leases.empty());
  });
  EXPECT_TRUE(answered) << "EnsureLatest of no names never called its callback";
}

// DropStaleCopy drops only a copy ordered before the newer origin; an
// unordered cache copy gives way to a durable version, not to a delete.
TEST_F(LatestReadsTest, DropStaleCopyKeepsACopyAsNewAsTheRecord) {
  Registry& registry = node_.registry();
  LatestReads& latest = node_.latest();
  ASSERT_TRUE(PublishLocal(registry, "ordered", 4, 1.0f, /*origin=*/10).ok());
  EXPECT_FALSE(latest.DropStaleCopy("ordered", 5));
  EXPECT_FALSE(latest.DropStaleCopy("ordered", 10));
  EXPECT_EQ(OriginHere(registry, "ordered"), 10);
  EXPECT_TRUE(latest.DropStaleCopy("ordered", 11));
  EXPECT_EQ(registry.Stat("ordered", 0).status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(PublishLocal(registry, "cache", 4, 1.0f, 0, Retention::kCache).ok());
  EXPECT_FALSE(latest.DropStaleCopy("cache", INT64_MAX));  // a delete of the durable name
  EXPECT_TRUE(registry.Stat("cache", 0).ok());
  EXPECT_TRUE(latest.DropStaleCopy("cache", 3));
  EXPECT_FALSE(registry.Stat("cache", 0).ok());

  ASSERT_TRUE(PublishLocal(registry, "unordered", 4, 1.0f, 0).ok());
  EXPECT_FALSE(latest.DropStaleCopy("unordered", INT64_MAX));
  EXPECT_FALSE(latest.DropStaleCopy("unordered", 3));
  EXPECT_TRUE(registry.Stat("unordered", 0).ok());
  EXPECT_FALSE(latest.DropStaleCopy("absent", 3));
  EXPECT_EQ(latest.stats().stale_copies_dropped, 2u);
}

}  // namespace
}  // namespace tensord
