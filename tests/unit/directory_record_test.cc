#include "service/cluster/directory_record.h"

#include "gtest/gtest.h"

namespace tensord {
namespace {

TEST(DirectoryRecordTest, KeysOfOneNameAreExactlyThoseUnderItsHolderPrefix) {
  EXPECT_EQ(HolderKey("/t", "model/w", "node-a"), "/t/names/h/model/w#node-a");
  EXPECT_EQ(HolderKeysOf("/t", "model/w"), "/t/names/h/model/w#");
  // A longer name sharing the prefix is not among model/w's holders.
  EXPECT_NE(HolderKey("/t", "model/w2", "n").rfind(HolderKeysOf("/t", "model/w"), 0), 0u);
  absl::StatusOr<DirectoryKey> holder = ParseDirectoryKey("/t", "/t/names/h/a/b.c#node-1");
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->kind, DirectoryKey::Kind::kHolder);
  EXPECT_EQ(holder->name, "a/b.c");
  EXPECT_EQ(holder->node, "node-1");
  absl::StatusOr<DirectoryKey> tombstone = ParseDirectoryKey("/t", TombstoneKey("/t", "x"));
  ASSERT_TRUE(tombstone.ok()) << tombstone.status();
  EXPECT_EQ(tombstone->kind, DirectoryKey::Kind::kTombstone);
  EXPECT_EQ(tombstone->name, "x");
}

TEST(DirectoryRecordTest, KeysTensordDoesNotWriteAreDataLossNamingThem) {
  for (const char* key : {"/t/names/h/x", "/t/names/h/x#bad node", "/t/names/h/../x#n",
                          "/t/names/q/x", "/other/names/h/x#n", "/t/names/h/#n"}) {
    absl::StatusOr<DirectoryKey> parsed = ParseDirectoryKey("/t", key);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << key;
    EXPECT_NE(parsed.status().message().find(key), std::string::npos) << parsed.status();
  }
}

TEST(DirectoryRecordTest, AnOriginalTakesItsKeysRevisionAndAReplicaKeepsItsOriginal) {
  HolderRecord original{.name = "w", .node = "a", .address = "10.0.0.1:50051", .version = 9,
                        .origin = 0, .total_bytes = 4096, .crc32c = 77};
  EtcdKeyValue kv{.key = HolderKey("/t", "w", "a"), .value = EncodeHolderValue(original),
                  .mod_revision = 120};
  absl::StatusOr<HolderRecord> decoded = DecodeHolder("/t", kv);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->origin, 120);
  EXPECT_EQ(decoded->address, "10.0.0.1:50051");
  EXPECT_EQ(decoded->version, 9u);
  EXPECT_FALSE(decoded->replica);

  HolderRecord replica = *decoded;
  replica.node = "b";
  replica.replica = true;
  EtcdKeyValue replica_kv{.key = HolderKey("/t", "w", "b"), .value = EncodeHolderValue(replica),
                          .mod_revision = 135};
  absl::StatusOr<HolderRecord> copy = DecodeHolder("/t", replica_kv);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->origin, 120) << "a replica is as new as its original, not as its registration";
  EXPECT_TRUE(copy->replica);
}

TEST(DirectoryRecordTest, ValuesTensordDoesNotWriteAreDataLoss) {
  for (const char* value :
       {"", "[]", "{}", R"({"address":"a:1","version":0,"origin":0,"total_bytes":1,"crc32c":1,"replica":false})",
        R"({"address":"","version":1,"origin":0,"total_bytes":1,"crc32c":1,"replica":false})",
        R"({"address":"a:1","version":1,"origin":-5,"total_bytes":1,"crc32c":1,"replica":false})",
        R"({"address":"a:1","version":1,"origin":0,"total_bytes":1,"crc32c":4294967296,"replica":false})"}) {
    EtcdKeyValue kv{.key = HolderKey("/t", "w", "a"), .value = value, .mod_revision = 3};
    EXPECT_EQ(DecodeHolder("/t", kv).status().code(), absl::StatusCode::kDataLoss) << value;
  }
}

}  // namespace
}  // namespace tensord
