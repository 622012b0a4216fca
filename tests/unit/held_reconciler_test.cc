// ReconcileHeld: what a (re)joining node holds is judged against the name
// records, so a node that was away never brings back an overwritten or
// deleted version: the record decides, not the node.
#include "service/cluster/held_reconciler.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/cluster/name_record.h"
#include "tests/unit/cluster_node_parts.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::ClusterNodeParts;
using cluster_test::DeleteKey;
using cluster_test::kClusterPrefix;
using cluster_test::PublishLocal;
using cluster_test::PutNameRecord;
using cluster_test::SampleRecord;

constexpr size_t kMaxTxnOps = 128;

class HeldReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(node_.members_ready()); }

  absl::StatusOr<ReconcileCounts> Reconcile() {
    return ReconcileHeld(node_.registry(), node_.store(), node_.reader(), node_.writes(),
                         node_.latest(), kClusterPrefix, node_.self(), kMaxTxnOps);
  }

  std::optional<NameRecord> Record(const std::string& name) {
    absl::StatusOr<std::optional<EtcdKeyValue>> kv =
        KvGet(node_.store(), NameRecordKey(kClusterPrefix, name));
    EXPECT_TRUE(kv.ok()) << kv.status();
    if (!kv.ok() || !kv->has_value()) return std::nullopt;
    absl::StatusOr<NameRecord> record = DecodeNameRecord(kClusterPrefix, **kv);
    EXPECT_TRUE(record.ok()) << record.status();
    if (!record.ok()) return std::nullopt;
    return *record;
  }

  // The origin of the registry's latest version of `name`; -1 when it has none.
  int64_t OriginHere(const std::string& name) {
    absl::StatusOr<VersionInfo> info = node_.registry().Stat(name, 0);
    return info.ok() ? info->origin : -1;
  }

  ClusterNodeParts node_{"node-a"};
};

// A restored version whose record was overwritten, or deleted, while the
// node was away is dropped.
TEST_F(HeldReconcilerTest, AnOrderedCopyWhoseRecordMovedOnOrWentIsDropped) {
  const int64_t restored_origin =
      PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("overwritten", "node-a"));
  PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("overwritten", "node-b"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "overwritten", 4, 1.0f, restored_origin).ok());

  const int64_t deleted_origin =
      PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("deleted", "node-a"));
  DeleteKey(node_.store(), NameRecordKey(kClusterPrefix, "deleted"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "deleted", 4, 1.0f, deleted_origin).ok());

  absl::StatusOr<ReconcileCounts> counts = Reconcile();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->checked, 2u);
  EXPECT_EQ(counts->dropped, 2u);
  EXPECT_EQ(counts->ordered, 0u);
  EXPECT_EQ(node_.registry().Stat("overwritten", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(node_.registry().Stat("deleted", 0).status().code(), absl::StatusCode::kNotFound);
  // The records are the cluster's: left as they were.
  EXPECT_EQ(Record("overwritten")->writer, "node-b");
  EXPECT_FALSE(Record("deleted").has_value());
}

// A restored version the record still orders is kept, and this node is
// listed among its holders again (the record's origin unchanged).
TEST_F(HeldReconcilerTest, AnOrderedCopyTheRecordStillNamesIsKeptAndJoinsTheHolders) {
  const int64_t origin =
      PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("kept", "node-b"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "kept", 4, 1.0f, origin).ok());
  absl::StatusOr<ReconcileCounts> counts = Reconcile();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->dropped, 0u);
  EXPECT_EQ(counts->joined, 1u);
  EXPECT_EQ(OriginHere("kept"), origin);
  std::optional<NameRecord> record = Record("kept");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->origin, origin);
  EXPECT_GT(record->mod_revision, origin);
  EXPECT_EQ(record->holders, (std::vector<std::string>{"node-b", "node-a"}));

  // Listed already: nothing to write the second time.
  const int64_t revision = node_.store().revision();
  counts = Reconcile();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->joined, 0u);
  EXPECT_EQ(node_.store().revision(), revision);
}

// A version held before the node was in the cluster (a preload, an old
// snapshot) and unknown to the cluster gets a record naming this node, and
// the record's revision as its origin.
TEST_F(HeldReconcilerTest, AnUnorderedVersionWithoutARecordIsOrderedNow) {
  absl::StatusOr<VersionInfo> preloaded = PublishLocal(node_.registry(), "fresh", 8, 2.0f, 0);
  ASSERT_TRUE(preloaded.ok()) << preloaded.status();
  absl::StatusOr<ReconcileCounts> counts = Reconcile();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->ordered, 1u);
  std::optional<NameRecord> record = Record("fresh");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->writer, "node-a");
  EXPECT_EQ(record->holders, (std::vector<std::string>{"node-a"}));
  EXPECT_EQ(record->total_bytes, preloaded->total_bytes);
  EXPECT_EQ(record->crc32c, preloaded->crc32c);
  EXPECT_EQ(OriginHere("fresh"), record->origin);
  EXPECT_EQ(record->origin, record->mod_revision);
}

// Every node preloading one file: the same bytes are one version, ordered
// by the record that is there; this node joins its holders.
TEST_F(HeldReconcilerTest, AnUnorderedVersionWithTheRecordsBytesJoinsTheHolders) {
  absl::StatusOr<VersionInfo> preloaded = PublishLocal(node_.registry(), "same", 8, 3.0f, 0);
  ASSERT_TRUE(preloaded.ok());
  const int64_t origin =
      PutNameRecord(node_.store(), kClusterPrefix,
                    SampleRecord("same", "node-b", preloaded->total_bytes, preloaded->crc32c));
  absl::StatusOr<ReconcileCounts> counts = Reconcile();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->joined, 1u);
  EXPECT_EQ(counts->ordered, 0u);
  EXPECT_EQ(counts->dropped, 0u);
  EXPECT_EQ(OriginHere("same"), origin);
  std::optional<NameRecord> record = Record("same");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->origin, origin);
  EXPECT_EQ(record->holders, (std::vector<std::string>{"node-b", "node-a"}));
}

// The cluster ordered other bytes for the name while this node was not in
// it: its version is dropped, the record left alone.
TEST_F(HeldReconcilerTest, AnUnorderedVersionWithOtherBytesThanTheRecordIsDropped) {
  absl::StatusOr<VersionInfo> preloaded = PublishLocal(node_.registry(), "other", 8, 4.0f, 0);
  ASSERT_TRUE(preloaded.ok());
  const int64_t origin =
      PutNameRecord(node_.store(), kClusterPrefix,
                    SampleRecord("other", "node-b", preloaded->total_bytes, preloaded->crc32c ^ 1));
  absl::StatusOr<ReconcileCounts> counts = Reconcile();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->dropped, 1u);
  EXPECT_EQ(node_.registry().Stat("other", 0).status().code(), absl::StatusCode::kNotFound);
  std::optional<NameRecord> record = Record("other");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->mod_revision, origin);
  EXPECT_EQ(record->holders, (std::vector<std::string>{"node-b"}));
}

// An unordered cache copy promises nothing across nodes: not judged, no record.
TEST_F(HeldReconcilerTest, AnUnorderedCacheCopyIsLeftAlone) {
  ASSERT_TRUE(PublishLocal(node_.registry(), "kv/1", 4, 1.0f, 0, Retention::kCache).ok());
  absl::StatusOr<ReconcileCounts> counts = Reconcile();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->checked, 0u);
  EXPECT_TRUE(node_.registry().Stat("kv/1", 0).ok());
  EXPECT_FALSE(Record("kv/1").has_value());
}

TEST_F(HeldReconcilerTest, AnUnreachableStoreFailsTheReconciliationAndDropsNothing) {
  const int64_t origin = PutNameRecord(node_.store(), kClusterPrefix, SampleRecord("a", "node-a"));
  ASSERT_TRUE(PublishLocal(node_.registry(), "a", 4, 1.0f, origin - 1).ok());
  ASSERT_TRUE(PublishLocal(node_.registry(), "b", 4, 1.0f, 0).ok());
  node_.store().SetReachable(false);
  absl::StatusOr<ReconcileCounts> counts = Reconcile();
  EXPECT_EQ(counts.status().code(), absl::StatusCode::kUnavailable) << counts.status();
  EXPECT_TRUE(node_.registry().Stat("a", 0).ok());
  EXPECT_EQ(OriginHere("b"), 0);
}

// More versions than a registry page and a transaction: every one is
// ordered, a transaction per max_txn_ops / 2 names.
TEST_F(HeldReconcilerTest, ManyUnorderedVersionsAreOrderedInBatches) {
  constexpr int kVersions = 1100;
  for (int i = 0; i < kVersions; ++i) {
    ASSERT_TRUE(PublishLocal(node_.registry(), absl::StrCat("n/", i), 1, 1.0f * i, 0).ok());
  }
  const uint64_t txns_before = node_.store().write_txns();
  absl::StatusOr<ReconcileCounts> counts = Reconcile();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->checked, static_cast<uint64_t>(kVersions));
  EXPECT_EQ(counts->ordered, static_cast<uint64_t>(kVersions));
  EXPECT_LE(node_.store().write_txns() - txns_before, (kVersions + 63) / 64 + 1u);
  for (int i = 0; i < kVersions; i += 97) {
    const std::string name = absl::StrCat("n/", i);
    std::optional<NameRecord> record = Record(name);
    ASSERT_TRUE(record.has_value()) << name;
    EXPECT_EQ(OriginHere(name), record->origin) << name;
  }
}

}  // namespace
}  // namespace tensord
