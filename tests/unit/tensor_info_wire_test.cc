#include "service/transport/tensor_info_wire.h"

#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/transport/tensor_service.h"
#include "service/wire/byte_buffer_codec.h"
#include "tensord/v1/tensor_service.pb.h"
#include "tests/unit/grpc_buffer_bytes.h"

namespace tensord {
namespace {

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

// Stored versions that between them set, leave at zero and push to their
// widest every field the hand-written encoder writes.
std::deque<TensorVersion> Versions() {
  std::deque<TensorVersion> versions;  // TensorVersion does not move
  auto add = [&](auto fill) {
    TensorVersion& version = versions.emplace_back();
    version.name = "models/encoder.layer-0:weight";
    version.version = 7;
    version.layout.dtype = DLDataType{kDLFloat, 32, 1};
    version.layout.shape = {2, 3};
    version.total_bytes = 24;
    version.crc32c = 0x1234abcd;
    version.created = absl::FromUnixNanos(1'700'000'000'123'456'789);
    fill(version);
  };
  add([](TensorVersion&) {});  // compact, strides computed
  add([](TensorVersion& v) {
    v.layout.shape = {};
    v.total_bytes = 4;
  });                         // a scalar
  add([](TensorVersion& v) {  // strided, offset, leases
    v.layout.shape = {4, 0, 300000};
    v.layout.strides = {-1, 1 << 20, std::numeric_limits<int64_t>::max()};
    v.layout.byte_offset = 129;
    v.open_leases.store(3);
    v.retention = Retention::kCache;
  });
  add([](TensorVersion& v) {  // zeros everywhere
    v.version = 0;
    v.layout.dtype = DLDataType{0, 0, 0};
    v.layout.shape = {0};
    v.total_bytes = 0;
    v.crc32c = 0;
    v.created = absl::UnixEpoch();
    v.retention = Retention::kDefault;
  });
  add([](TensorVersion& v) {  // device, widest values
    v.version = std::numeric_limits<uint64_t>::max();
    v.layout.dtype = DLDataType{kDLBfloat, 16, 65535};
    v.layout.device = DLDevice{kDLCUDA, 7};
    v.total_bytes = std::numeric_limits<uint64_t>::max();
    v.crc32c = std::numeric_limits<uint32_t>::max();
    v.created = absl::FromUnixNanos(-5);  // before the epoch: negative int64
    v.open_leases.store(std::numeric_limits<uint64_t>::max());
    v.retention = Retention::kPinned;
  });
  add([](TensorVersion& v) {  // negative device id
    v.layout.device = DLDevice{kDLCPU, -1};
    v.name = std::string(256, 'n');  // two-byte length
  });
  add([](TensorVersion& v) {  // 32 dimensions
    v.layout.shape.assign(32, 1);
    v.layout.shape[31] = 1'000'000'007;
  });
  return versions;
}

TEST(TensorInfoWireTest, WritesTheBytesTheGeneratedSerializerWrites) {
  for (const TensorVersion& version : Versions()) {
    v1::TensorInfo proto;
    InfoToProto(version, &proto);
    const std::string expected = proto.SerializeAsString();
    const TensorInfoWire wire(version);
    ASSERT_EQ(wire.size(), expected.size()) << Hex(expected);
    std::string written(wire.size(), '\0');
    const uint8_t* end = wire.Write(reinterpret_cast<uint8_t*>(written.data()));
    EXPECT_EQ(end, reinterpret_cast<const uint8_t*>(written.data()) + written.size());
    EXPECT_EQ(Hex(written), Hex(expected)) << version.layout.shape.size() << " dims";
  }
}

TEST(TensorInfoWireTest, StatResponseMatchesTheGeneratedOne) {
  for (const TensorVersion& version : Versions()) {
    v1::StatResponse proto;
    InfoToProto(version, proto.mutable_info());
    EXPECT_EQ(Hex(BufferBytes(EncodeStatResponse(version))), Hex(proto.SerializeAsString()));
  }
}

TEST(TensorInfoWireTest, FetchHeadersMatchTheGeneratedOnes) {
  struct Range {
    uint64_t offset;
    uint64_t length;
    bool split;
  };
  for (const TensorVersion& version : Versions()) {
    for (Range range : {Range{0, 0, false}, Range{0, 24, false}, Range{5, 19, true},
                        Range{1ull << 40, 1ull << 33, true}}) {
      v1::FetchResponse proto;
      v1::FetchHeader* header = proto.mutable_header();
      InfoToProto(version, header->mutable_info());
      header->mutable_range()->set_offset(range.offset);
      header->mutable_range()->set_length(range.length);
      header->set_split(range.split);
      const FetchHeaderWire wire(version, range.offset, range.length, range.split);
      const std::string written =
          BufferBytes(MakeHeaderBuffer(wire.size(), [&](uint8_t* out) { wire.Write(out); }));
      EXPECT_EQ(Hex(written), Hex(proto.SerializeAsString()));

      // With inline data, as FetchInline sends a small tensor.
      if (range.split) continue;
      const std::string data(range.length, 'x');
      header->set_inline_data(data);
      const std::string inlined = BufferBytes(MakeInlineHeaderBuffer(
          wire.size(), [&](uint8_t* out) { wire.Write(out); }, grpc::Slice(data)));
      EXPECT_EQ(Hex(inlined), Hex(proto.SerializeAsString()));
    }
  }
}

}  // namespace
}  // namespace tensord
