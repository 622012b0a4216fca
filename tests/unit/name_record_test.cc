#include "service/cluster/name_record.h"

#include "gtest/gtest.h"

namespace tensord {
namespace {

EtcdKeyValue Stored(const NameRecord& record, bool with_origin, int64_t mod_revision) {
  return EtcdKeyValue{.key = NameRecordKey("/p", record.name),
                      .value = EncodeNameRecord(record, with_origin),
                      .mod_revision = mod_revision};
}

NameRecord Sample() {
  return NameRecord{.name = "model/w",
                    .writer = "node-a",
                    .total_bytes = 4096,
                    .crc32c = 0xdeadbeef,
                    .holders = {"node-a", "node-b"}};
}

TEST(NameRecordTest, AWriteThatOrdersAVersionTakesItsRevisionAsTheOrigin) {
  const EtcdKeyValue kv = Stored(Sample(), /*with_origin=*/false, 17);
  EXPECT_TRUE(RecordValueOrdersAVersion(kv.value));
  EXPECT_FALSE(RecordValueNamesAGroup(kv.value));
  absl::StatusOr<NameRecord> decoded = DecodeNameRecord("/p", kv);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->origin, 17);
  EXPECT_EQ(decoded->mod_revision, 17);
  NameRecord expected = Sample();
  expected.origin = 17;
  expected.mod_revision = 17;
  EXPECT_EQ(*decoded, expected);
}

TEST(NameRecordTest, ARewriteOfTheSameVersionKeepsItsOrigin) {
  NameRecord record = Sample();
  record.origin = 17;
  record.group = "node-a.1.2";
  const EtcdKeyValue kv = Stored(record, /*with_origin=*/true, 30);
  EXPECT_FALSE(RecordValueOrdersAVersion(kv.value));
  EXPECT_TRUE(RecordValueNamesAGroup(kv.value));
  absl::StatusOr<NameRecord> decoded = DecodeNameRecord("/p", kv);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->origin, 17);
  EXPECT_EQ(decoded->mod_revision, 30);
  EXPECT_EQ(decoded->group, "node-a.1.2");
}

TEST(NameRecordTest, WhatTensordDoesNotWriteIsDataLossNamingTheKey) {
  const NameRecord good = Sample();
  struct Bad {
    std::string key;
    std::string value;
  };
  const std::string key = NameRecordKey("/p", "model/w");
  for (const Bad& bad : std::vector<Bad>{
           {"/other/names/model/w", EncodeNameRecord(good, false)},
           {"/p/names/../w", EncodeNameRecord(good, false)},
           {key, "not json"},
           {key, "[]"},
           {key, R"({"writer":"node-a","crc32c":1,"holders":["node-a"]})"},
           {key, R"({"writer":"node a","total_bytes":1,"crc32c":1,"holders":["node-a"]})"},
           {key, R"({"writer":"node-a","total_bytes":1,"crc32c":1,"holders":[]})"},
           {key, R"({"writer":"node-a","total_bytes":1,"crc32c":1,"holders":["x y"]})"},
           {key, R"({"writer":"node-a","total_bytes":1,"crc32c":4294967296,"holders":["a"]})"},
           {key, R"({"writer":"node-a","total_bytes":1,"crc32c":1,"holders":["a"],"origin":99})"},
           {key, R"({"writer":"node-a","total_bytes":1,"crc32c":1,"holders":["a"],"origin":0})"},
       }) {
    absl::StatusOr<NameRecord> decoded = DecodeNameRecord(
        "/p", EtcdKeyValue{.key = bad.key, .value = bad.value, .mod_revision = 20});
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss)
        << bad.key << " = " << bad.value;
    if (!decoded.ok()) {
      EXPECT_NE(decoded.status().message().find(bad.key.substr(0, 20)), std::string::npos)
          << decoded.status();
    }
  }
}

// What a newer tensord may add is ignored; an origin equal to the key's
// own revision (the rewrite's) is allowed.
TEST(NameRecordTest, UnknownFieldsAreIgnoredAndAnOriginMayEqualTheKeysRevision) {
  NameRecord record = Sample();
  record.origin = 30;
  std::string value = EncodeNameRecord(record, /*with_origin=*/true);
  value.insert(1, R"("zone":"eu-1","replicas":{"wanted":3},)");
  absl::StatusOr<NameRecord> decoded = DecodeNameRecord(
      "/p",
      EtcdKeyValue{.key = NameRecordKey("/p", "model/w"), .value = value, .mod_revision = 30});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->origin, 30);
  EXPECT_EQ(decoded->holders, record.holders);
}

TEST(NameRecordTest, AnOversizedValueABadGroupOrAnEmptyNameIsDataLoss) {
  const std::string key = NameRecordKey("/p", "model/w");
  std::string huge = EncodeNameRecord(Sample(), false);
  huge.insert(1, "\"pad\":\"" + std::string(9000, 'x') + "\",");
  for (const EtcdKeyValue& bad : std::vector<EtcdKeyValue>{
           {.key = key, .value = huge, .mod_revision = 5},
           {.key = key,
           .value = R"({"writer":"node-a","total_bytes":1,"crc32c":1,"holders":["a"],"group":""})",
           .mod_revision = 5},
           {.key = key,
           .value = R"({"writer":"node-a","total_bytes":1,"crc32c":1,"holders":["a"],"group":7})",
           .mod_revision = 5},
           {.key = NameRecordKey("/p", ""),
           .value = EncodeNameRecord(Sample(), false),
           .mod_revision = 5},
       }) {
    EXPECT_EQ(DecodeNameRecord("/p", bad).status().code(), absl::StatusCode::kDataLoss)
        << bad.key << " = " << bad.value.substr(0, 100);
  }
}

TEST(NameRecordTest, TooManyHoldersAreRefused) {
  NameRecord record = Sample();
  record.holders.clear();
  for (size_t i = 0; i <= kMaxRecordHolders; ++i) record.holders.push_back("n" + std::to_string(i));
  EXPECT_EQ(DecodeNameRecord("/p", Stored(record, false, 3)).status().code(),
            absl::StatusCode::kDataLoss);
  record.holders.pop_back();
  EXPECT_TRUE(DecodeNameRecord("/p", Stored(record, false, 3)).ok());
}

}  // namespace
}  // namespace tensord
