#include "service/wire/wire_tensor_info.h"

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "client/src/info_conversion.h"
#include "gtest/gtest.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/tensor_info_fields.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {
namespace {

std::span<const uint8_t> Bytes(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

v1::TensorInfo FullInfo() {
  v1::TensorInfo info;
  info.set_name("models/encoder.w");
  info.set_version(12);
  v1::TensorLayout& layout = *info.mutable_layout();
  layout.mutable_dtype()->set_code(kDLFloat);
  layout.mutable_dtype()->set_bits(32);
  layout.mutable_dtype()->set_lanes(1);
  layout.add_shape(2);
  layout.add_shape(3);
  layout.add_strides(3);
  layout.add_strides(1);
  layout.set_byte_offset(8);
  layout.mutable_device()->set_type(kDLCUDA);
  layout.mutable_device()->set_id(1);
  info.set_total_bytes(32);
  info.set_crc32c(0xfeedbeef);
  info.set_created_unix_nanos(-7);
  info.set_open_leases(3);
  info.set_retention(v1::RETENTION_CACHE);
  return info;
}

void ExpectSameFields(const WireTensorInfo& a, const WireTensorInfo& b) {
#define TENSORD_EXPECT_SAME_FIELD(name, number, wire_type) EXPECT_TRUE(a.name == b.name) << #name;
  TENSORD_TENSOR_INFO_FIELDS(TENSORD_EXPECT_SAME_FIELD)
#undef TENSORD_EXPECT_SAME_FIELD
}

// The table of tensor_info_fields.h is the generated message's fields:
// every one of them, with its number and wire type.
TEST(TensorInfoFieldsTest, TheTableIsTheGeneratedMessagesFields) {
  const google::protobuf::Descriptor* descriptor = v1::TensorInfo::descriptor();
  int listed = 0;
#define TENSORD_CHECK_FIELD(member, field_number, wire_type)                               \
  {                                                                                        \
    const google::protobuf::FieldDescriptor* field = descriptor->FindFieldByName(#member); \
    ASSERT_NE(field, nullptr) << #member << " is not a field of v1::TensorInfo";           \
    EXPECT_EQ(field->number(), field_number) << #member;                                   \
    const bool length_delimited =                                                          \
        field->type() == google::protobuf::FieldDescriptor::TYPE_STRING ||                 \
        field->type() == google::protobuf::FieldDescriptor::TYPE_BYTES ||                  \
        field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE;                  \
    EXPECT_EQ(length_delimited, (wire_type) == kWireLengthDelimited) << #member;           \
    EXPECT_EQ(tensor_info_field::member, static_cast<uint32_t>(field_number));             \
    ++listed;                                                                              \
  }
  TENSORD_TENSOR_INFO_FIELDS(TENSORD_CHECK_FIELD)
#undef TENSORD_CHECK_FIELD
  EXPECT_EQ(listed, descriptor->field_count())
      << "a field of tensor.proto is missing from the table";
}

// Every field set, node too: the hand reader and the conversion from the
// generated message (both generated from the table) agree.
TEST(TensorInfoFieldsTest, ReaderAndConversionAgreeOnEveryField) {
  v1::TensorInfo info = FullInfo();
  info.set_node("node-b");
  WireTensorInfo parsed;
  ASSERT_TRUE(ParseWireTensorInfo(Bytes(info.SerializeAsString()), parsed));
  EXPECT_TRUE(parsed == WireInfoOf(info));
  EXPECT_EQ(parsed.node, "node-b");
  EXPECT_EQ(parsed.open_leases, 3u);
  EXPECT_EQ(parsed.layout.shape, (std::vector<int64_t>{2, 3}));
}

TEST(WireTensorInfoTest, ReadsWhatTheGeneratedSerializerWrites) {
  const v1::TensorInfo info = FullInfo();
  WireTensorInfo parsed;
  ASSERT_TRUE(ParseWireTensorInfo(Bytes(info.SerializeAsString()), parsed));
  ExpectSameFields(parsed, WireInfoOf(info));

  v1::StatResponse stat;
  *stat.mutable_info() = info;
  WireTensorInfo from_stat;
  ASSERT_TRUE(ParseWireStatResponse(Bytes(stat.SerializeAsString()), from_stat));
  ExpectSameFields(from_stat, WireInfoOf(info));

  v1::FetchHeader header;
  *header.mutable_info() = info;
  header.mutable_range()->set_offset(4);
  header.mutable_range()->set_length(28);
  header.set_inline_data(std::string(28, 'x'));
  header.set_split(true);
  const std::string header_bytes = header.SerializeAsString();  // inline_data views it
  WireFetchHeader from_header;
  ASSERT_TRUE(ParseWireFetchHeader(Bytes(header_bytes), from_header));
  ExpectSameFields(from_header.info, WireInfoOf(info));
  EXPECT_EQ(from_header.range_offset, 4u);
  EXPECT_EQ(from_header.range_length, 28u);
  EXPECT_TRUE(from_header.split);
  ASSERT_TRUE(from_header.has_inline_data);
  EXPECT_EQ(std::string(from_header.inline_data.begin(), from_header.inline_data.end()),
            header.inline_data());

  absl::StatusOr<TensorInfo> converted = InfoFromWire(parsed);
  ASSERT_TRUE(converted.ok()) << converted.status();
  EXPECT_EQ(converted->retention, Retention::kCache);
  EXPECT_EQ(converted->strides, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(converted->device.device_type, kDLCUDA);
}

TEST(WireTensorInfoTest, MergesRepeatsAsProtobufDoes) {
  // Two infos in one StatResponse: scalars of the second win, the layouts
  // merge and their repeated fields append.
  v1::TensorInfo second;
  second.set_version(99);
  second.mutable_layout()->add_shape(5);
  const std::string bytes = [&] {
    v1::StatResponse a, b;
    *a.mutable_info() = FullInfo();
    *b.mutable_info() = second;
    return a.SerializeAsString() + b.SerializeAsString();
  }();
  v1::StatResponse merged;
  ASSERT_TRUE(merged.ParseFromString(bytes));
  WireTensorInfo parsed;
  ASSERT_TRUE(ParseWireStatResponse(Bytes(bytes), parsed));
  ExpectSameFields(parsed, WireInfoOf(merged.info()));
  EXPECT_EQ(parsed.version, 99u);
  EXPECT_EQ(parsed.layout.shape, (std::vector<int64_t>{2, 3, 5}));
}

// Field `field` of wire type 2 holding `payload`.
std::string LengthDelimited(int field, const std::string& payload) {
  std::string out(1, static_cast<char>((field << 3) | 2));
  for (uint64_t length = payload.size();; length >>= 7) {
    out += static_cast<char>(length < 0x80 ? length : (length & 0x7f) | 0x80);
    if (length < 0x80) break;
  }
  return out + payload;
}

// `depth` unknown groups (field 15, one-byte tags) nested in each other.
std::string NestedGroups(int depth) {
  return std::string(depth, static_cast<char>((15 << 3) | 3)) +
         std::string(depth, static_cast<char>((15 << 3) | 4));
}

// Unknown groups nested `depth` deep: protobuf counts each group and each
// enclosing message against its limit of 100 levels, and the hand parsers
// must refuse at the same depth. Both sides of each limit are checked.
TEST(WireTensorInfoTest, RefusesNestingWhereProtobufDoes) {
  for (int depth : {1, 98, 99, 100, 101, 150}) {
    const std::string bytes = NestedGroups(depth);
    v1::TensorInfo proto;
    WireTensorInfo parsed;
    const bool proto_ok = proto.ParseFromString(bytes);
    EXPECT_EQ(proto_ok, depth <= 100) << depth;
    EXPECT_EQ(ParseWireTensorInfo(Bytes(bytes), parsed), proto_ok) << depth;

    const std::string in_stat = LengthDelimited(1, bytes);
    v1::StatResponse stat;
    const bool stat_ok = stat.ParseFromString(in_stat);
    EXPECT_EQ(stat_ok, depth <= 99) << depth;
    EXPECT_EQ(ParseWireStatResponse(Bytes(in_stat), parsed), stat_ok) << depth;
  }
}

// Inside a FetchResponse: in its header's info (two levels down) and in
// its chunk (one).
TEST(WireTensorInfoTest, RefusesNestingInAFetchResponseWhereProtobufDoes) {
  for (int depth : {1, 97, 98, 99, 100, 101}) {
    const std::string groups = NestedGroups(depth);
    const std::pair<std::string, int> routes[] = {
        {LengthDelimited(1, LengthDelimited(1, groups)), 98},
        {LengthDelimited(2, groups), 99},
    };
    for (const auto& [bytes, limit] : routes) {
      v1::FetchResponse proto;
      WireFetchHeader header;
      bool has_header = false;
      const bool proto_ok = proto.ParseFromString(bytes);
      EXPECT_EQ(proto_ok, depth <= limit) << depth;
      EXPECT_EQ(ParseWireFetchResponse(Bytes(bytes), header, has_header), proto_ok) << depth;
    }
  }
}

TEST(WireTensorInfoTest, RefusesWhatProtobufRefuses) {
  const std::string good = FullInfo().SerializeAsString();
  const std::string cases[] = {
      good.substr(0, good.size() - 1),         // cut short
      std::string("\x0a\x02\xc3\x28", 4),      // name not UTF-8
      std::string("\x0a\x03\xed\xa0\x80", 5),  // a UTF-16 surrogate
      std::string("\x00", 1),                  // tag 0
      std::string("\x0c", 1),                  // end-group with no group open
      std::string("\x0e\x00", 2),              // wire type 6
      std::string("\x10\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 12),  // 11-byte varint
      std::string("\x88\x80\x80\x80\x80\x00\x01", 7),  // a tag padded to six bytes
      std::string("\x1a\x85\x80\x80\x80\x08", 6),      // a length of 2 GiB
      std::string("\x1a\x02\x12\x05", 4),              // packed shape running past the layout
      std::string("\xa3\x01\xac\x01", 4),              // group 20 closed as group 21
  };
  for (const std::string& bytes : cases) {
    v1::TensorInfo proto;
    ASSERT_FALSE(proto.ParseFromString(bytes)) << absl::CHexEscape(bytes);
    WireTensorInfo parsed;
    EXPECT_FALSE(ParseWireTensorInfo(Bytes(bytes), parsed)) << absl::CHexEscape(bytes);
  }
  // Accepted by both: a valid multi-byte name, a redundant varint byte, an
  // unknown fixed64, an empty layout.
  for (const std::string& bytes :
       {std::string("\x0a\x02\xc3\xa9", 4), std::string("\x10\x81\x00", 3),
        std::string("\xa1\x01\x01\x02\x03\x04\x05\x06\x07\x08", 10), std::string("\x1a\x00", 2)}) {
    v1::TensorInfo proto;
    ASSERT_TRUE(proto.ParseFromString(bytes)) << absl::CHexEscape(bytes);
    WireTensorInfo parsed;
    ASSERT_TRUE(ParseWireTensorInfo(Bytes(bytes), parsed)) << absl::CHexEscape(bytes);
    ExpectSameFields(parsed, WireInfoOf(proto));
  }
}

// A FetchInline answer read whole: the oneof's rules as protobuf applies
// them, checked against the generated parser on the same bytes.
TEST(WireTensorInfoTest, ReadsAWholeFetchResponseAsProtobufDoes) {
  v1::FetchResponse with_bytes;
  *with_bytes.mutable_header()->mutable_info() = FullInfo();
  with_bytes.mutable_header()->mutable_range()->set_length(6);
  with_bytes.mutable_header()->set_inline_data("abcdef");
  v1::FetchResponse later;  // merges: a new range length and new bytes
  later.mutable_header()->mutable_range()->set_length(3);
  later.mutable_header()->set_inline_data("xyz");
  v1::FetchResponse chunk;
  chunk.mutable_chunk()->set_offset(7);
  chunk.mutable_chunk()->set_data("chunk");
  v1::FetchResponse empty_bytes;
  empty_bytes.mutable_header()->set_inline_data("");
  v1::FetchResponse split;
  *split.mutable_header()->mutable_info() = FullInfo();
  split.mutable_header()->mutable_range()->set_length(1 << 20);
  split.mutable_header()->set_split(true);
  const std::string cases[] = {
      with_bytes.SerializeAsString(),
      with_bytes.SerializeAsString() + later.SerializeAsString(),
      with_bytes.SerializeAsString() + chunk.SerializeAsString(),  // the chunk replaces it
      chunk.SerializeAsString() + later.SerializeAsString(),       // a fresh header
      // A fresh header: nothing of the first survives the chunk between.
      with_bytes.SerializeAsString() + chunk.SerializeAsString() + later.SerializeAsString(),
      split.SerializeAsString(),
      chunk.SerializeAsString(),
      empty_bytes.SerializeAsString(),
      "",
  };
  for (const std::string& bytes : cases) {
    v1::FetchResponse proto;
    ASSERT_TRUE(proto.ParseFromString(bytes)) << absl::CHexEscape(bytes);
    WireFetchHeader header;
    bool has_header = true;
    ASSERT_TRUE(ParseWireFetchResponse(Bytes(bytes), header, has_header))
        << absl::CHexEscape(bytes);
    ASSERT_EQ(has_header, proto.has_header()) << absl::CHexEscape(bytes);
    if (!has_header) continue;
    ExpectSameFields(header.info, WireInfoOf(proto.header().info()));
    EXPECT_EQ(header.range_offset, proto.header().range().offset());
    EXPECT_EQ(header.range_length, proto.header().range().length());
    EXPECT_EQ(header.split, proto.header().split());
    EXPECT_EQ(header.has_inline_data, proto.header().has_inline_data());
    EXPECT_EQ(std::string(header.inline_data.begin(), header.inline_data.end()),
              proto.header().inline_data());
  }
  // Refused by both: a chunk whose data runs past it, a header cut short.
  const std::string with_bytes_wire = with_bytes.SerializeAsString();
  for (const std::string& bytes : {std::string("\x12\x03\x12\x05\x00", 5),
                                   with_bytes_wire.substr(0, with_bytes_wire.size() - 1)}) {
    v1::FetchResponse proto;
    ASSERT_FALSE(proto.ParseFromString(bytes)) << absl::CHexEscape(bytes);
    WireFetchHeader header;
    bool has_header = false;
    EXPECT_FALSE(ParseWireFetchResponse(Bytes(bytes), header, has_header))
        << absl::CHexEscape(bytes);
  }
}

}  // namespace
}  // namespace tensord
