// ParseWireBatchFetchRequest reads what the generated parser reads: the
// same items, prefix (presence included) and numbers, repeats merged as
// protobuf merges them, and it refuses what protobuf refuses.
#include "service/wire/wire_requests.h"

#include <cstdint>
#include <span>
#include <string>

#include "gtest/gtest.h"
#include "tensord/v1/tensor_service.pb.h"

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

}  // namespace
}  // namespace tensord
