#include "service/wire/byte_buffer_codec.h"

#include <string>

#include "gtest/gtest.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {
namespace {

std::string Join(std::span<const std::span<const uint8_t>> pieces) {
  std::string out;
  for (auto piece : pieces) out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  return out;
}

TEST(ByteBufferCodecTest, InlineHeaderBufferIsTheFetchResponseProtobufWrites) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{32 * 1024}}) {
    std::string data(size, 'q');
    v1::FetchHeader header;
    header.mutable_info()->set_name("inline/y");
    header.mutable_range()->set_length(size);
    grpc::ByteBuffer buffer = MakeInlineHeaderBuffer(header, grpc::Slice(data));
    grpc::Slice flat;
    ASSERT_TRUE(buffer.DumpToSingleSlice(&flat).ok());
    v1::FetchResponse parsed;
    ASSERT_TRUE(parsed.ParseFromArray(flat.begin(), static_cast<int>(flat.size()))) << size;
    ASSERT_TRUE(parsed.has_header());
    ASSERT_TRUE(parsed.header().has_inline_data());
    EXPECT_EQ(parsed.header().inline_data(), data);
    EXPECT_EQ(parsed.header().info().name(), "inline/y");
    ByteBufferDecoder decoder;
    ASSERT_TRUE(decoder.Decode(buffer, HeaderInlineData::kLift).ok());
    EXPECT_EQ(Join(decoder.message().inline_data), data);
  }
}

TEST(ByteBufferCodecTest, SerializeToByteBufferRoundTrips) {
  v1::FetchRequest request;
  EXPECT_EQ(SerializeToByteBuffer(request).Length(), 0u);
  request.set_name(std::string(300, 'n'));
  request.set_version(9);
  v1::FetchRequest parsed;
  ASSERT_TRUE(ParseFromByteBuffer(SerializeToByteBuffer(request), parsed, "request").ok());
  EXPECT_EQ(parsed.name(), request.name());
  EXPECT_EQ(parsed.version(), 9u);
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {

TEST(ByteBufferCodecTest, NameVersionRequestIsWhatProtobufWrites) {
  for (const std::string& name : {std::string(), std::string("w"), std::string(256, 'n')}) {
    for (uint64_t version : {uint64_t{0}, uint64_t{1}, uint64_t{300}, ~uint64_t{0}}) {
      v1::StatRequest stat;
      stat.set_name(name);
      stat.set_version(version);
      v1::FetchRequest fetch;
      fetch.set_name(name);
      fetch.set_version(version);
      grpc::Slice written;
      ASSERT_TRUE(EncodeNameVersionRequest(name, version).DumpToSingleSlice(&written).ok());
      const std::string bytes(reinterpret_cast<const char*>(written.begin()), written.size());
      EXPECT_EQ(bytes, stat.SerializeAsString()) << name.size() << " " << version;
      EXPECT_EQ(bytes, fetch.SerializeAsString()) << name.size() << " " << version;
      // What gRPC writes into a call's send buffer for the request type.
      grpc::ByteBuffer sent;
      bool own_buffer = false;
      ASSERT_TRUE(grpc::SerializationTraits<NameVersionRequest>::Serialize(
                      NameVersionRequest{.name = name, .version = version}, &sent, &own_buffer)
                      .ok());
      EXPECT_TRUE(own_buffer);
      grpc::Slice serialized;
      ASSERT_TRUE(sent.DumpToSingleSlice(&serialized).ok());
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(serialized.begin()), serialized.size()),
                bytes);
    }
  }
}

}  // namespace
}  // namespace tensord
