// The server's reader of BatchPut messages of options and whole items
// (BatchPutItemsDecoder), against what the generated serializer writes,
// cut into pieces at every place a slice boundary may fall.
#include "service/wire/batch_put_items.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "tensord/v1/tensor_service.pb.h"
#include "tests/fuzz/same_put_header.h"

namespace tensord {
namespace {

struct Decoded {
  std::string name;
  uint64_t total_bytes = 0;
  bool has_crc32c = false;
  std::string data;
};

absl::StatusOr<std::vector<Decoded>> DecodeAll(BatchPutItemsDecoder& decoder,
                                               std::span<const std::span<const uint8_t>> pieces,
                                               BatchPutItemsDecoder::Message* message = nullptr) {
  std::vector<Decoded> items;
  WirePutHeader header;
  absl::StatusOr<BatchPutItemsDecoder::Message> decoded =
      decoder.Decode(pieces, [&](const WireBatchPutItem& item) {
        if (!ParseBatchPutHeader(item, BatchPutItemsDecoder::kItemNesting, header)) {
          return absl::InvalidArgumentError("bad header");
        }
        items.push_back({std::string(header.name), header.total_bytes, header.crc32c.has_value(),
                         std::string(item.data.begin(), item.data.end())});
        return absl::OkStatus();
      });
  if (!decoded.ok()) return decoded.status();
  if (message != nullptr) *message = *decoded;
  return items;
}

std::span<const uint8_t> Bytes(const std::string& bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

v1::BatchPutRequest ThreeItems() {
  v1::BatchPutRequest request;
  for (int i = 0; i < 3; ++i) {
    v1::BatchPutItem* item = request.mutable_items()->add_items();
    item->mutable_header()->set_name("kv/" + std::to_string(i));
    item->mutable_header()->set_total_bytes(10 * i);
    if (i == 1) item->mutable_header()->set_crc32c(0);  // set, though zero
    item->set_data(std::string(10 * i, static_cast<char>('a' + i)));
  }
  return request;
}

TEST(BatchPutItemsTest, ReadsTheItemsCutAnywhere) {
  const std::string bytes = ThreeItems().SerializeAsString();
  BatchPutItemsDecoder decoder;  // reused across messages
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    const std::span<const uint8_t> pieces[] = {Bytes(bytes).subspan(0, cut),
                                               Bytes(bytes).subspan(cut)};
    BatchPutItemsDecoder::Message message;
    absl::StatusOr<std::vector<Decoded>> items = DecodeAll(decoder, pieces, &message);
    ASSERT_TRUE(items.ok()) << "cut at " << cut << ": " << items.status();
    EXPECT_TRUE(message.has_items);
    EXPECT_FALSE(message.has_options);
    ASSERT_EQ(items->size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ((*items)[i].name, "kv/" + std::to_string(i));
      EXPECT_EQ((*items)[i].data, std::string(10 * i, static_cast<char>('a' + i)));
      EXPECT_EQ((*items)[i].has_crc32c, i == 1);
    }
  }
}

TEST(BatchPutItemsTest, AHeaderInTwoPartsMergesAsProtobufMergesIt) {
  // BatchPutItems { item { header {name}, header {total_bytes}, data } }.
  v1::PutHeader name_only;
  name_only.set_name("kv/merged");
  v1::PutHeader size_only;
  size_only.set_total_bytes(2);
  std::string item;
  item += '\x0a' + std::string(1, static_cast<char>(name_only.ByteSizeLong())) +
          name_only.SerializeAsString();
  item += '\x0a' + std::string(1, static_cast<char>(size_only.ByteSizeLong())) +
          size_only.SerializeAsString();
  item += std::string("\x12\x02xy", 4);
  const std::string items = '\x0a' + std::string(1, static_cast<char>(item.size())) + item;
  const std::string message = '\x22' + std::string(1, static_cast<char>(items.size())) + items;
  v1::BatchPutRequest proto;
  ASSERT_TRUE(proto.ParseFromString(message));

  BatchPutItemsDecoder decoder;
  const std::span<const uint8_t> piece[] = {Bytes(message)};
  absl::StatusOr<std::vector<Decoded>> decoded = DecodeAll(decoder, piece);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ((*decoded)[0].name, proto.items().items(0).header().name());
  EXPECT_EQ((*decoded)[0].total_bytes, proto.items().items(0).header().total_bytes());
  EXPECT_EQ((*decoded)[0].data, "xy");
}

// Found by the fuzzer: a header occurrence cut inside a field (a fixed64
// with 6 of its 8 bytes) that the next occurrence would complete if the two
// were parsed joined. Protobuf parses each on its own and refuses it.
TEST(BatchPutItemsTest, AHeaderCutInsideAFieldIsRefusedThoughTheNextWouldCompleteIt) {
  const std::string cut_header = std::string("\x0a\x02kv") + "\x31" + std::string(6, '\x01');
  const std::string rest_header = "\x28\x01";  // retention = 1
  std::string item;
  item += '\x0a' + std::string(1, static_cast<char>(cut_header.size())) + cut_header;
  item += '\x0a' + std::string(1, static_cast<char>(rest_header.size())) + rest_header;
  const std::string items = '\x0a' + std::string(1, static_cast<char>(item.size())) + item;
  const std::string message = '\x22' + std::string(1, static_cast<char>(items.size())) + items;
  v1::BatchPutRequest proto;
  ASSERT_FALSE(proto.ParseFromString(message));

  BatchPutItemsDecoder decoder;
  const std::span<const uint8_t> piece[] = {Bytes(message)};
  EXPECT_EQ(DecodeAll(decoder, piece).status().code(), absl::StatusCode::kInvalidArgument);
}

v1::PutHeader FullHeader() {
  v1::PutHeader header;
  header.set_name("kv/layer0/block/17");
  v1::TensorLayout& layout = *header.mutable_layout();
  layout.mutable_dtype()->set_code(kDLFloat);
  layout.mutable_dtype()->set_bits(16);
  layout.mutable_dtype()->set_lanes(1);
  layout.add_shape(16);
  layout.add_shape(128);
  layout.add_strides(128);
  layout.add_strides(1);
  layout.set_byte_offset(0);
  layout.mutable_device()->set_type(kDLCPU);
  header.set_total_bytes(4096);
  header.set_crc32c(0xdeadbeef);
  header.set_retention(v1::RETENTION_CACHE);
  header.set_replicas(2);
  v1::PutPart& part = *header.mutable_part();
  part.set_upload_id(std::string(32, 'a'));
  part.set_parts(2);
  part.set_offset(2048);
  part.set_length(2048);
  return header;
}

// Parses `bytes` as a header sent alone both ways: they agree.
void ExpectAloneSameAsGenerated(const std::string& bytes) {
  v1::PutHeader proto;
  const bool proto_ok = proto.ParseFromString(bytes);
  WirePutHeader parsed;
  parsed.name = "stale";
  ASSERT_EQ(ParseWirePutHeader(Bytes(bytes), parsed), proto_ok) << absl::CHexEscape(bytes);
  if (proto_ok) EXPECT_TRUE(SamePutHeader(parsed, proto)) << absl::CHexEscape(bytes);
}

TEST(BatchPutItemsTest, AHeaderParsedByHandHoldsWhatTheGeneratedParserReads) {
  const v1::PutHeader full = FullHeader();
  ExpectAloneSameAsGenerated(full.SerializeAsString());
  ExpectAloneSameAsGenerated("");
  v1::PutHeader zero_crc;  // set though zero: present
  zero_crc.set_name("a");
  zero_crc.set_crc32c(0);
  ExpectAloneSameAsGenerated(zero_crc.SerializeAsString());
  // Two headers joined merge: scalars and strings the last, the layout's
  // shape appended, the part's fields merged.
  v1::PutHeader second;
  second.set_name("kv/other");
  second.mutable_layout()->add_shape(2);
  second.mutable_part()->set_length(7);
  ExpectAloneSameAsGenerated(full.SerializeAsString() + second.SerializeAsString());
  // Unknown fields of every wire type, and a group, are skipped.
  ExpectAloneSameAsGenerated(full.SerializeAsString() + std::string("\x40\x01\x49", 3) +
                             std::string(8, '\x02') + std::string("\x55\x01\x02\x03\x04", 5) +
                             std::string("\x5a\x01z\x63\x08\x01\x64", 7));
  // Refused alike: a name or upload id that is not UTF-8, a cut field.
  ExpectAloneSameAsGenerated(std::string("\x0a\x02\xc3\x28", 4));
  ExpectAloneSameAsGenerated(std::string("\x3a\x04\x0a\x02\xff\xfe", 6));
  ExpectAloneSameAsGenerated(full.SerializeAsString().substr(0, 20));
  ExpectAloneSameAsGenerated(std::string("\x18\x80", 2));
  // Layouts nested in groups around protobuf's recursion limit.
  for (int depth : {97, 98, 99, 100, 101}) {
    const std::string groups = std::string(depth, '\x4b') + std::string(depth, '\x4c');
    ExpectAloneSameAsGenerated(groups);
    std::string layout = "\x12";
    layout += static_cast<char>(0x80 | (groups.size() & 0x7f));
    layout += static_cast<char>(groups.size() >> 7);
    ExpectAloneSameAsGenerated(layout + groups);
  }
}

TEST(BatchPutItemsTest, AnItemsHeaderParsedByHandHoldsWhatTheGeneratedParserReads) {
  v1::BatchPutRequest request;
  v1::BatchPutItem& item = *request.mutable_items()->add_items();
  *item.mutable_header() = FullHeader();
  item.set_data(std::string(4096, 'x'));
  const std::string bytes = request.SerializeAsString();
  BatchPutItemsDecoder decoder;
  const std::span<const uint8_t> piece[] = {Bytes(bytes)};
  int seen = 0;
  absl::StatusOr<BatchPutItemsDecoder::Message> decoded =
      decoder.Decode(piece, [&](const WireBatchPutItem& wire_item) {
        WirePutHeader header;
        EXPECT_TRUE(ParseBatchPutHeader(wire_item, BatchPutItemsDecoder::kItemNesting, header));
        EXPECT_TRUE(SamePutHeader(header, item.header()));
        ++seen;
        return absl::OkStatus();
      });
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(seen, 1);
}

TEST(BatchPutItemsTest, ReadsOptionsAndRefusesThemBesideItems) {
  v1::BatchPutRequest options;
  options.mutable_options()->set_atomic(true);
  const std::string options_bytes = options.SerializeAsString();
  BatchPutItemsDecoder decoder;
  const std::span<const uint8_t> piece[] = {Bytes(options_bytes)};
  BatchPutItemsDecoder::Message message;
  absl::StatusOr<std::vector<Decoded>> none = DecodeAll(decoder, piece, &message);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  EXPECT_TRUE(message.has_options);
  EXPECT_TRUE(message.atomic);
  EXPECT_FALSE(message.has_items);

  const std::string both = ThreeItems().SerializeAsString() + options_bytes;
  const std::span<const uint8_t> both_piece[] = {Bytes(both)};
  absl::StatusOr<std::vector<Decoded>> refused = DecodeAll(decoder, both_piece);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("both options and items"), std::string::npos)
      << refused.status();
}

TEST(BatchPutItemsTest, RefusesTruncatedMessagesAndBadHeaders) {
  const std::string bytes = ThreeItems().SerializeAsString();
  BatchPutItemsDecoder decoder;
  for (size_t size = 1; size < bytes.size(); ++size) {
    const std::span<const uint8_t> piece[] = {Bytes(bytes).subspan(0, size)};
    EXPECT_EQ(DecodeAll(decoder, piece).status().code(), absl::StatusCode::kInvalidArgument)
        << "truncated to " << size;
  }
  // A name that is not UTF-8: protobuf refuses the whole message.
  v1::BatchPutRequest bad = ThreeItems();
  bad.mutable_items()->mutable_items(0)->mutable_header()->set_name("\xc3\x28");
  std::string bad_bytes;
  ASSERT_TRUE(bad.SerializePartialToString(&bad_bytes));
  v1::BatchPutRequest reparsed;
  EXPECT_FALSE(reparsed.ParseFromString(bad_bytes));
  const std::span<const uint8_t> piece[] = {Bytes(bad_bytes)};
  EXPECT_EQ(DecodeAll(decoder, piece).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tensord
