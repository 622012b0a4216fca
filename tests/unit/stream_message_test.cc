#include "service/wire/stream_message.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/wire/layout_conversion.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {
namespace {

std::vector<std::span<const uint8_t>> SplitEvery(const std::string& bytes, size_t piece) {
  std::vector<std::span<const uint8_t>> pieces;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    pieces.emplace_back(reinterpret_cast<const uint8_t*>(bytes.data()) + i,
                        std::min(piece, bytes.size() - i));
  }
  return pieces;
}

std::string Join(std::span<const std::span<const uint8_t>> pieces) {
  std::string out;
  for (auto piece : pieces) out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  return out;
}

TEST(StreamMessageTest, HandEncodedChunkParsesAsProtobuf) {
  for (uint64_t offset : {uint64_t{0}, uint64_t{127}, uint64_t{1} << 40}) {
    std::string data(300, 'x');
    uint8_t prefix[kMaxChunkPrefixBytes];
    size_t n = EncodeChunkPrefix(offset, data.size(), prefix);
    std::string wire(reinterpret_cast<char*>(prefix), n);
    wire += data;
    v1::FetchResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire));
    ASSERT_TRUE(parsed.has_chunk());
    EXPECT_EQ(parsed.chunk().offset(), offset);
    EXPECT_EQ(parsed.chunk().data(), data);
  }
}

TEST(StreamMessageTest, DecodesProtobufEncodingAcrossAnySplit) {
  v1::PutRequest request;
  request.mutable_chunk()->set_offset(4096);
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  request.mutable_chunk()->set_data(data);
  std::string wire = request.SerializeAsString();
  for (size_t piece : {1, 2, 3, 7, 64, 5000}) {
    auto pieces = SplitEvery(wire, piece);
    StreamMessage message;
    ASSERT_TRUE(DecodeStreamMessage(pieces, message).ok()) << piece;
    EXPECT_EQ(message.kind, StreamMessage::Kind::kChunk);
    EXPECT_EQ(message.chunk_offset, 4096u);
    EXPECT_EQ(message.chunk_size, data.size());
    EXPECT_EQ(Join(message.chunk_pieces), data);
  }
}

TEST(StreamMessageTest, DecodesHeaderAndSkipsUnknownFields) {
  v1::PutRequest request;
  request.mutable_header()->set_name("abc");
  request.mutable_header()->set_total_bytes(12);
  std::string wire = request.SerializeAsString();
  wire += std::string("\x98\x06\x05", 3);  // unknown varint field 99
  StreamMessage message;
  auto pieces = SplitEvery(wire, 4);
  ASSERT_TRUE(DecodeStreamMessage(pieces, message).ok());
  ASSERT_EQ(message.kind, StreamMessage::Kind::kHeader);
  v1::PutHeader header;
  ASSERT_TRUE(header.ParseFromString(message.header));
  EXPECT_EQ(header.name(), "abc");
}

TEST(StreamMessageTest, RejectsMalformedInput) {
  v1::PutRequest request;
  request.mutable_chunk()->set_offset(1);
  request.mutable_chunk()->set_data("hello");
  std::string wire = request.SerializeAsString();
  for (size_t cut = 1; cut < wire.size(); ++cut) {
    std::string truncated = wire.substr(0, cut);
    StreamMessage message;
    EXPECT_FALSE(DecodeStreamMessage(SplitEvery(truncated, 3), message).ok()) << cut;
  }
  v1::PutRequest header;
  header.mutable_header()->set_name("x");
  std::string both = header.SerializeAsString() + wire;
  StreamMessage message;
  auto status = DecodeStreamMessage(SplitEvery(both, 100), message);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  std::string group = "\x0b";  // start-group wire type
  EXPECT_FALSE(DecodeStreamMessage(SplitEvery(group, 1), message).ok());
  // A tag padded to 6 bytes: protobuf refuses it, so must we.
  std::string padded_tag = std::string("\x88\x80\x80\x80\x80\x00\x01", 7);
  v1::PutRequest padded;
  EXPECT_FALSE(padded.ParseFromString(padded_tag));
  EXPECT_FALSE(DecodeStreamMessage(SplitEvery(padded_tag, 2), message).ok());
  // Lengths padded to 6 bytes (a chunk's, its data's, an unknown field's):
  // protobuf reads a length in at most 5 bytes (its ReadSize), so must we.
  // A 5-byte length is fine for both.
  for (const std::string& padded_length : {std::string("\x12\x80\x80\x80\x80\x80\x00", 7),
                                           std::string("\x12\x07\x12\x80\x80\x80\x80\x80\x00", 9),
                                           std::string("\x1a\x80\x80\x80\x80\x80\x00", 7)}) {
    EXPECT_FALSE(padded.ParseFromString(padded_length));
    EXPECT_FALSE(DecodeStreamMessage(SplitEvery(padded_length, 2), message).ok());
  }
  const std::string five_byte_length("\x12\x06\x12\x80\x80\x80\x80\x00", 8);
  EXPECT_TRUE(padded.ParseFromString(five_byte_length));
  EXPECT_TRUE(DecodeStreamMessage(SplitEvery(five_byte_length, 2), message).ok());
  // Lengths of 2 GiB and more: protobuf refuses them before it looks for the bytes.
  const std::string two_gib_length("\x1a\x80\x80\x80\x80\x08", 6);
  EXPECT_FALSE(padded.ParseFromString(two_gib_length));
  EXPECT_FALSE(DecodeStreamMessage(SplitEvery(two_gib_length, 2), message).ok());
  std::string overlong(11, '\xff');
  overlong.insert(overlong.begin(), '\x08');
  EXPECT_FALSE(DecodeStreamMessage(SplitEvery(overlong, 1), message).ok());
}

// A fetch header with `data` inline, as protobuf writes it, with an unknown
// field after the data.
std::string InlineHeaderWire(const std::string& data) {
  v1::FetchResponse response;
  v1::FetchHeader* header = response.mutable_header();
  header->mutable_info()->set_name("inline/x");
  header->mutable_info()->set_total_bytes(data.size());
  header->mutable_range()->set_length(data.size());
  header->set_inline_data(data);
  std::string wire = response.SerializeAsString();
  return wire;
}

TEST(StreamMessageTest, LiftsInlineDataInPlaceAcrossAnySplit) {
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  const std::string wire = InlineHeaderWire(data);
  v1::FetchResponse expected;
  ASSERT_TRUE(expected.ParseFromString(wire));
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, wire.size()}) {
    StreamMessage message;
    ASSERT_TRUE(DecodeStreamMessage(SplitEvery(wire, piece), message, HeaderInlineData::kLift).ok())
        << piece;
    ASSERT_EQ(message.kind, StreamMessage::Kind::kHeader);
    ASSERT_TRUE(message.has_inline_data);
    EXPECT_EQ(Join(message.inline_data), data);
    v1::FetchHeader header;
    ASSERT_TRUE(header.ParseFromString(message.header));
    EXPECT_FALSE(header.has_inline_data());
    header.set_inline_data(data);
    EXPECT_EQ(header.SerializeAsString(), expected.header().SerializeAsString());
    // The pieces point into the input: nothing was copied.
    const auto* begin = reinterpret_cast<const uint8_t*>(wire.data());
    for (std::span<const uint8_t> inline_piece : message.inline_data) {
      EXPECT_GE(inline_piece.data(), begin);
      EXPECT_LE(inline_piece.data() + inline_piece.size(), begin + wire.size());
    }
  }
  // Kept, the data stays in the header for protobuf, as before.
  StreamMessage kept;
  ASSERT_TRUE(DecodeStreamMessage(SplitEvery(wire, 5), kept).ok());
  EXPECT_FALSE(kept.has_inline_data);
  v1::FetchHeader header;
  ASSERT_TRUE(header.ParseFromString(kept.header));
  EXPECT_EQ(header.inline_data(), data);
}

TEST(StreamMessageTest, LiftedInlineDataFollowsProtobufRules) {
  // Empty inline data is present, not absent.
  StreamMessage message;
  const std::string empty = InlineHeaderWire("");
  ASSERT_TRUE(DecodeStreamMessage(SplitEvery(empty, 2), message, HeaderInlineData::kLift).ok());
  EXPECT_TRUE(message.has_inline_data);
  EXPECT_TRUE(message.inline_data.empty());
  // No inline data: none lifted.
  v1::FetchResponse split;
  split.mutable_header()->set_split(true);
  ASSERT_TRUE(DecodeStreamMessage(SplitEvery(split.SerializeAsString(), 2), message,
                                  HeaderInlineData::kLift)
                  .ok());
  EXPECT_FALSE(message.has_inline_data);
  // A repeated field 3: the last wins, as protobuf reads it.
  std::string twice = std::string(
                          "\x1a\x02"
                          "ab",
                          4) +
                      std::string(
                          "\x1a\x03"
                          "xyz",
                          5);
  std::string wire = std::string("\x0a", 1) + static_cast<char>(twice.size()) + twice;
  ASSERT_TRUE(DecodeStreamMessage(SplitEvery(wire, 3), message, HeaderInlineData::kLift).ok());
  EXPECT_EQ(Join(message.inline_data), "xyz");
  v1::FetchResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.header().inline_data(), "xyz");
  // Field 3 of another wire type is not inline data: it stays in the header.
  std::string varint3 = std::string("\x0a\x02\x18\x05", 4);
  ASSERT_TRUE(DecodeStreamMessage(SplitEvery(varint3, 1), message, HeaderInlineData::kLift).ok());
  EXPECT_FALSE(message.has_inline_data);
  EXPECT_EQ(message.header, std::string("\x18\x05", 2));
}

TEST(StreamMessageTest, LiftRefusesFieldsBeyondTheHeader) {
  StreamMessage message;
  // Inline data whose length runs past the header's own length.
  std::string past = std::string(
      "\x0a\x03\x1a\x05"
      "abcdefgh",
      12);
  EXPECT_EQ(DecodeStreamMessage(SplitEvery(past, 2), message, HeaderInlineData::kLift).code(),
            absl::StatusCode::kInvalidArgument);
  // A group inside a header.
  std::string group = std::string("\x0a\x01\x0b", 3);
  EXPECT_EQ(DecodeStreamMessage(SplitEvery(group, 1), message, HeaderInlineData::kLift).code(),
            absl::StatusCode::kInvalidArgument);
  // Every truncation of a valid header fails cleanly.
  const std::string wire = InlineHeaderWire("0123456789");
  for (size_t cut = 1; cut < wire.size(); ++cut) {
    EXPECT_FALSE(
        DecodeStreamMessage(SplitEvery(wire.substr(0, cut), 2), message, HeaderInlineData::kLift)
            .ok())
        << cut;
  }
}

TEST(StreamMessageTest, RandomBytesNeverCrash) {
  std::mt19937 random(42);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(random() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    StreamMessage message;
    (void)DecodeStreamMessage(SplitEvery(bytes, 1 + random() % 8), message);
  }
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {

// Found by request_validation_fuzz: a device type outside the installed
// DLDeviceType enum was cast into it (undefined behaviour).
TEST(LayoutConversionTest, UnknownDeviceTypesAreRejectedBeforeTheCast) {
  for (int32_t type : {45, 16, 5, -1}) {
    v1::TensorLayout proto;
    proto.mutable_dtype()->set_code(1);
    proto.mutable_dtype()->set_bits(8);
    proto.mutable_device()->set_type(type);
    absl::StatusOr<dlpack::TensorLayout> layout = LayoutFromProto(proto);
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument) << type;
    EXPECT_NE(layout.status().message().find(absl::StrCat("layout.device.type ", type)),
              absl::string_view::npos)
        << layout.status();
  }
  v1::TensorLayout cuda;
  cuda.mutable_dtype()->set_code(1);
  cuda.mutable_dtype()->set_bits(8);
  cuda.mutable_device()->set_type(kDLCUDA);
  cuda.mutable_device()->set_id(1);
  absl::StatusOr<dlpack::TensorLayout> layout = LayoutFromProto(cuda);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->device.device_type, kDLCUDA);
  cuda.mutable_device()->set_id(-2);
  EXPECT_EQ(LayoutFromProto(cuda).status().code(), absl::StatusCode::kInvalidArgument);
}

// The proto says Fetch always returns strides filled in: compact ones are
// written in place, stored ones as they are, and a reused message keeps none
// of its earlier entries.
TEST(LayoutConversionTest, StridesAreAlwaysFilledIn) {
  const DLDataType f32{kDLFloat, 32, 1};
  v1::TensorLayout proto;
  LayoutToProto(dlpack::TensorLayout{.dtype = f32, .shape = {2, 3, 4}}, &proto);
  EXPECT_THAT(proto.strides(), ::testing::ElementsAre(12, 4, 1));
  EXPECT_THAT(proto.shape(), ::testing::ElementsAre(2, 3, 4));
  LayoutToProto(dlpack::TensorLayout{.dtype = f32, .shape = {5, 0, 2}}, &proto);
  EXPECT_THAT(proto.strides(), ::testing::ElementsAre(2, 2, 1));
  LayoutToProto(dlpack::TensorLayout{.dtype = f32, .shape = {3, 2}, .strides = {1, 3}}, &proto);
  EXPECT_THAT(proto.strides(), ::testing::ElementsAre(1, 3));
  LayoutToProto(dlpack::TensorLayout{.dtype = f32, .shape = {}}, &proto);
  EXPECT_TRUE(proto.strides().empty());
  EXPECT_TRUE(proto.shape().empty());
}

}  // namespace
}  // namespace tensord
