// ParseWireBatchFetchRequest reads what the generated parser reads: the
// same items, prefix (presence included) and numbers, repeats merged as
// protobuf merges them, and it refuses what protobuf refuses.
// ParseWirePutManyRequest takes every put_many a client sends, reading what
// the generated parser reads, and leaves to protobuf what it refuses or
// reads as another kind.
#include "service/wire/wire_requests.h"

#include <cstdint>
#include <span>
#include <string>

#include "gtest/gtest.h"
#include "tensord/v1/handoff.pb.h"
#include "tensord/v1/tensor_service.pb.h"
#include "tests/fuzz/same_put_header.h"

namespace tensord {
namespace {

using namespace std::string_literals;

std::span<const uint8_t> Bytes(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// Parses `wire` both ways; they must agree on whether it parses and, when
// it does, on every field.
void ExpectSameAsGenerated(const std::string& wire) {
  v1::BatchFetchRequest proto;
  const bool proto_ok = proto.ParseFromString(wire);
  WireBatchFetchRequest parsed;
  ASSERT_EQ(ParseWireBatchFetchRequest(Bytes(wire), parsed), proto_ok);
  if (!proto_ok) return;
  ASSERT_EQ(parsed.items.size(), static_cast<size_t>(proto.items_size()));
  for (int i = 0; i < proto.items_size(); ++i) {
    EXPECT_EQ(parsed.items[i].name, proto.items(i).name()) << i;
    EXPECT_EQ(parsed.items[i].version, proto.items(i).version()) << i;
  }
  ASSERT_EQ(parsed.prefix.has_value(), proto.has_prefix());
  if (parsed.prefix.has_value()) {
    EXPECT_EQ(*parsed.prefix, proto.prefix());
  }
  EXPECT_EQ(parsed.group_version, proto.group_version());
  EXPECT_EQ(parsed.cluster_group, proto.cluster_group());
}

TEST(WireBatchFetchRequestTest, ReadsWhatTheGeneratedSerializerWrites) {
  v1::BatchFetchRequest by_names;
  for (int i = 0; i < 1000; ++i) {
    v1::NameVersion* item = by_names.add_items();
    item->set_name("bench/batch/fetch/4096/" + std::to_string(i));
    item->set_version(i % 3 == 0 ? 0 : uint64_t{1} << (i % 64));
  }
  by_names.add_items();  // an empty name and version 0: an empty submessage
  ExpectSameAsGenerated(by_names.SerializeAsString());

  v1::BatchFetchRequest by_prefix;
  by_prefix.set_prefix("kv/layer0/");
  ExpectSameAsGenerated(by_prefix.SerializeAsString());
  v1::BatchFetchRequest empty_prefix;
  empty_prefix.set_prefix("");  // set, so every name
  ExpectSameAsGenerated(empty_prefix.SerializeAsString());
  v1::BatchFetchRequest groups;
  groups.set_group_version(~uint64_t{0});
  groups.set_cluster_group(12345);
  ExpectSameAsGenerated(groups.SerializeAsString());
  ExpectSameAsGenerated("");

  WireBatchFetchRequest parsed;
  ASSERT_TRUE(ParseWireBatchFetchRequest(Bytes(empty_prefix.SerializeAsString()), parsed));
  EXPECT_TRUE(parsed.prefix.has_value());
  ASSERT_TRUE(ParseWireBatchFetchRequest(Bytes(""), parsed));
  EXPECT_FALSE(parsed.prefix.has_value());  // reset by the parse
}

TEST(WireBatchFetchRequestTest, MergesRepeatsAsProtobufDoes) {
  // An item whose name and version come twice (the last kept), a prefix
  // twice, numbers twice, unknown fields of every wire type between them.
  const std::string item =
      "\x0a\x01"
      "a"
      "\x10\x05"
      "\x0a\x02"
      "bc"
      "\x10\x07"s;
  std::string wire = std::string("\x0a") + static_cast<char>(item.size()) + item;
  wire +=
      "\x12\x02"
      "p1"
      "\x12\x02"
      "p2"s;
  wire +=
      "\x18\x01"
      "\x18\x02"
      "\x20\x03"
      "\x20\x04"s;
  wire +=
      "\x28\x09"
      "\x31"
      "12345678"
      "\x3d"
      "1234"
      "\x42\x01"
      "z"s;
  wire +=
      "\x4b"
      "\x08\x01"
      "\x4c"s;          // a group: start, a varint inside, end
  wire += "\x0a\x00"s;  // a second, empty item
  ExpectSameAsGenerated(wire);
  WireBatchFetchRequest parsed;
  ASSERT_TRUE(ParseWireBatchFetchRequest(Bytes(wire), parsed));
  ASSERT_EQ(parsed.items.size(), 2u);
  EXPECT_EQ(parsed.items[0].name, "bc");
  EXPECT_EQ(parsed.items[0].version, 7u);
  EXPECT_EQ(parsed.prefix, "p2");
  EXPECT_EQ(parsed.group_version, 2u);
  EXPECT_EQ(parsed.cluster_group, 4u);
}

TEST(WireBatchFetchRequestTest, RefusesWhatProtobufRefuses) {
  ExpectSameAsGenerated(
      "\x0a\x05\x0a\x03"
      "ab"s);                                          // item past the end
  ExpectSameAsGenerated("\x0a\x04\x0a\x02\xc3\x28"s);  // a name not UTF-8
  ExpectSameAsGenerated("\x12\x02\xff\xfe"s);          // a prefix not UTF-8
  ExpectSameAsGenerated("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"s);
  ExpectSameAsGenerated("\x00"s);          // tag 0
  ExpectSameAsGenerated("\x0c"s);          // an end-group outside one
  ExpectSameAsGenerated("\x0a\x02\x08"s);  // an item longer than what is left
  // A string as field 1 of an item has wire type 2; as a varint it is an
  // unknown field, skipped by both.
  ExpectSameAsGenerated("\x0a\x02\x08\x01"s);
  // Groups nested around protobuf's recursion limit, at the top and inside
  // an item: both parse or both refuse.
  for (int depth : {98, 99, 100, 101, 150}) {
    const std::string groups = std::string(depth, '\x2b') + std::string(depth, '\x2c');
    ExpectSameAsGenerated(groups);
    std::string item = "\x0a";
    item += static_cast<char>(0x80 | (groups.size() & 0x7f));
    item += static_cast<char>(groups.size() >> 7);
    ExpectSameAsGenerated(item + groups);
  }
}

// Parses `wire` both ways: the hand parser takes it exactly when `taken`,
// and what it takes is what protobuf read.
void ExpectPutMany(const std::string& wire, bool taken) {
  v1::HandoffRequest proto;
  const bool proto_ok = proto.ParseFromString(wire);
  WirePutManyRequest parsed;
  parsed.items.emplace_back();  // reset by the parse
  ASSERT_EQ(ParseWirePutManyRequest(Bytes(wire), parsed), taken);
  if (!taken) return;
  ASSERT_TRUE(proto_ok);
  EXPECT_TRUE(SamePutMany(parsed, proto)) << proto.DebugString();
}

v1::HandoffRequest TypicalPutMany() {
  v1::HandoffRequest request;
  request.set_request_id(41);
  request.add_release_lease_ids(7);
  request.add_release_lease_ids(uint64_t{1} << 40);
  v1::PutManyRequest& put = *request.mutable_put_many();
  for (int i = 0; i < 300; ++i) {
    v1::PutManyItem& item = *put.add_items();
    item.set_name("bench/batch/put/" + std::to_string(i));
    item.mutable_layout()->mutable_dtype()->set_code(1);
    item.mutable_layout()->mutable_dtype()->set_bits(8);
    item.mutable_layout()->mutable_dtype()->set_lanes(1);
    item.mutable_layout()->add_shape(4096);
    item.mutable_layout()->mutable_device()->set_type(1);
    item.set_total_bytes(4096);
    item.set_retention(static_cast<v1::Retention>(i % 3));
    if (i % 2 == 0) item.set_crc32c(i == 0 ? 0 : 0xDEADBEEF);  // present, even 0
    item.set_offset(static_cast<uint64_t>(i) * 4096);
  }
  put.set_atomic(true);
  return request;
}

// `payload` behind a one-byte tag and its length.
std::string Framed(char tag, const std::string& payload) {
  std::string out(1, tag);
  size_t size = payload.size();
  while (size >= 0x80) {
    out += static_cast<char>(0x80 | (size & 0x7f));
    size >>= 7;
  }
  out += static_cast<char>(size);
  return out + payload;
}

TEST(WirePutManyRequestTest, TakesWhatTheGeneratedSerializerWrites) {
  ExpectPutMany(TypicalPutMany().SerializeAsString(), /*taken=*/true);
  v1::HandoffRequest bare;
  bare.mutable_put_many();  // no items, no id: still a put_many
  ExpectPutMany(bare.SerializeAsString(), /*taken=*/true);
  v1::HandoffRequest odd;
  v1::PutManyItem& item = *odd.mutable_put_many()->add_items();
  item.mutable_layout()->add_shape(-3);
  item.mutable_layout()->add_strides(int64_t{1} << 62);
  item.mutable_layout()->mutable_device()->set_id(-1);
  item.set_retention(static_cast<v1::Retention>(-7));  // an open enum keeps it
  item.set_crc32c(~uint32_t{0});
  item.set_offset(~uint64_t{0});
  odd.mutable_put_many()->add_items();  // an empty item
  ExpectPutMany(odd.SerializeAsString(), /*taken=*/true);
}

TEST(WirePutManyRequestTest, MergesRepeatsAsProtobufDoes) {
  // An item's name twice (the last kept) and layout twice (merged: shape
  // [2, 3] packed, then 5 unpacked), its checksum twice.
  const std::string item =
      "\x0a\x01"
      "a"
      "\x12\x04\x12\x02\x02\x03"
      "\x0a\x02"
      "bc"
      "\x12\x02\x10\x05"
      "\x18\x18\x28\x00\x28\x09"s;
  // The id twice; release ids unpacked, then packed; put_many twice (items
  // appended, atomic the last one's); unknown fields of every wire type.
  std::string wire = "\x08\x01\x58\x04"s;
  wire += Framed('\x62', Framed('\x0a', item) + "\x10\x01"s);
  wire += "\x5a\x02\x05\x06\x08\x02"s;
  wire +=
      "\x68\x09"
      "\x71"
      "12345678"
      "\x7d"
      "1234"s;
  wire += "\xb3\x01\x08\x01\xb4\x01"s;  // a group (field 22): start, a varint, end
  wire += "\x62\x04\x0a\x00\x10\x00"s;  // a second put_many: an empty item, atomic false
  ExpectPutMany(wire, /*taken=*/true);
  WirePutManyRequest parsed;
  ASSERT_TRUE(ParseWirePutManyRequest(Bytes(wire), parsed));
  EXPECT_EQ(parsed.request_id, 2u);
  EXPECT_EQ(parsed.release_lease_ids, (std::vector<uint64_t>{4, 5, 6}));
  ASSERT_EQ(parsed.items.size(), 2u);
  EXPECT_EQ(parsed.items[0].name, "bc");
  EXPECT_EQ(parsed.items[0].layout.shape, (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(parsed.items[0].crc32c, 9u);
  EXPECT_FALSE(parsed.atomic);
}

TEST(WirePutManyRequestTest, LeavesOtherKindsAndWhatProtobufRefusesToIt) {
  const std::string put_many = TypicalPutMany().SerializeAsString();
  // Another kind before put_many (protobuf keeps put_many, the last), after
  // it (the other kind), or alone; a put_many with a varint's wire type (an
  // unknown field: no kind); nothing.
  v1::HandoffRequest acquire;
  acquire.mutable_acquire()->set_name("x");
  ExpectPutMany(acquire.SerializeAsString() + put_many, /*taken=*/false);
  ExpectPutMany(put_many + acquire.SerializeAsString(), /*taken=*/false);
  ExpectPutMany(acquire.SerializeAsString(), /*taken=*/false);
  ExpectPutMany("\x08\x01\x60\x01"s, /*taken=*/false);
  ExpectPutMany(""s, /*taken=*/false);
  // Refused by protobuf: a name not UTF-8, an item past the end, a cut id.
  ExpectPutMany("\x62\x06\x0a\x04\x0a\x02\xc3\x28"s, /*taken=*/false);
  ExpectPutMany("\x62\x05\x0a\x09\x0a\x01"s, /*taken=*/false);
  ExpectPutMany("\x08\xff"s, /*taken=*/false);
  // Groups nested inside an item's layout around protobuf's recursion
  // limit: taken exactly where protobuf parses them.
  for (int depth : {94, 95, 96, 97, 98, 150}) {
    const std::string groups = std::string(depth, '\x2b') + std::string(depth, '\x2c');
    const std::string wire = Framed('\x62', Framed('\x0a', Framed('\x12', groups)));
    v1::HandoffRequest proto;
    ExpectPutMany(wire, /*taken=*/proto.ParseFromString(wire));
  }
}

}  // namespace
}  // namespace tensord
