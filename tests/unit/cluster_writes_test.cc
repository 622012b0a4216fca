// ClusterWrites::Replicate against name records in a MemoryKvStore: a
// replica joins the record's holders only as a durable copy. No test here
// reaches another node (the copies asked for are already held).
#include "service/cluster/cluster_writes.h"

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "service/cluster/name_record.h"
#include "tests/unit/cluster_node_parts.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::ClusterNodeParts;
using cluster_test::kClusterPrefix;
using cluster_test::PublishLocal;
using cluster_test::PutMember;
using cluster_test::PutNameRecord;
using cluster_test::SampleRecord;
using cluster_test::WaitUntil;

absl::Status ReplicateNow(ClusterWrites& writes, ReplicaSource source) {
  auto answered = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> answer = answered->get_future();
  writes.Replicate(std::move(source),
                   [answered](absl::Status status) { answered->set_value(std::move(status)); });
  if (answer.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return absl::DeadlineExceededError("Replicate did not answer in 10 s");
  }
  return answer.get();
}

NameRecord RecordNow(KvStore& store, const std::string& name) {
  absl::StatusOr<std::optional<EtcdKeyValue>> kv =
      KvGet(store, NameRecordKey(kClusterPrefix, name));
  if (!kv.ok() || !kv->has_value()) return NameRecord{};
  absl::StatusOr<NameRecord> record = DecodeNameRecord(kClusterPrefix, **kv);
  return record.ok() ? *record : NameRecord{};
}

class ClusterWritesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PutMember(node_.store(), kClusterPrefix, "node-b");
    ASSERT_TRUE(node_.members_ready());
    ASSERT_TRUE(WaitUntil([&] { return node_.members().Find("node-b").has_value(); }));
  }
  ClusterNodeParts node_{"node-a"};
};

// Found in review: a node that had read the version (a cache copy, which
// eviction may drop) was asked for a replica and only joined the holders,
// so a put acknowledged with replicas=2 had one durable copy.
TEST_F(ClusterWritesTest, AReplicaOfAVersionHeldAsACacheCopyIsKeptDurably) {
  NameRecord record = SampleRecord("w", "node-b", /*total_bytes=*/16);
  const int64_t origin = PutNameRecord(node_.store(), kClusterPrefix, record);
  ASSERT_TRUE(PublishLocal(node_.registry(), "w", 4, 2.0f, origin, Retention::kCache).ok());
  absl::StatusOr<VersionInfo> read_copy = node_.registry().Stat("w", 0);
  ASSERT_TRUE(read_copy.ok()) << read_copy.status();

  const absl::Status replicated =
      ReplicateNow(node_.writes(), ReplicaSource{.name = "w",
                                                 .node = "node-b",
                                                 .origin = origin,
                                                 .total_bytes = 16,
                                                 .crc32c = read_copy->crc32c});
  ASSERT_TRUE(replicated.ok()) << replicated;
  absl::StatusOr<VersionInfo> kept = node_.registry().Stat("w", 0);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->retention, Retention::kDefault);
  EXPECT_EQ(kept->origin, origin);
  EXPECT_EQ(kept->crc32c, read_copy->crc32c);
  const NameRecord now = RecordNow(node_.store(), "w");
  EXPECT_EQ(now.holders, (std::vector<std::string>{"node-b", "node-a"}));
}

TEST_F(ClusterWritesTest, AReplicaOfAVersionHeldDurablyOnlyJoinsTheHolders) {
  const int64_t origin =
      PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("d", "node-b", 16));
  ASSERT_TRUE(PublishLocal(node_.registry(), "d", 4, 3.0f, origin).ok());
  const uint64_t version = node_.registry().Stat("d", 0)->version;
  const absl::Status replicated = ReplicateNow(
      node_.writes(),
      ReplicaSource{.name = "d", .node = "node-b", .origin = origin, .total_bytes = 16});
  ASSERT_TRUE(replicated.ok()) << replicated;
  EXPECT_EQ(node_.registry().Stat("d", 0)->version, version);  // the same copy, not a new one
  EXPECT_EQ(RecordNow(node_.store(), "d").holders, (std::vector<std::string>{"node-b", "node-a"}));
}

}  // namespace
}  // namespace tensord
