#include "service/wire/stream_message.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
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

std::string Join(const std::vector<std::span<const uint8_t>>& pieces) {
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
  std::string overlong(11, '\xff');
  overlong.insert(overlong.begin(), '\x08');
  EXPECT_FALSE(DecodeStreamMessage(SplitEvery(overlong, 1), message).ok());
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

}  // namespace
}  // namespace tensord
