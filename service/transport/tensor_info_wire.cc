#include "service/transport/tensor_info_wire.h"

#include <cstring>

#include "absl/time/time.h"
#include "service/dlpack/tensor_layout.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// Field numbers of tensor.proto.
enum InfoField : uint32_t {
  kName = 1, kVersion = 2, kLayout = 3, kTotalBytes = 4, kCrc32c = 5, kCreated = 6,
  kOpenLeases = 7, kRetention = 8,
};
enum LayoutField : uint32_t { kDtype = 1, kShape = 2, kStrides = 3, kByteOffset = 4, kDevice = 5 };
enum DataTypeField : uint32_t { kCode = 1, kBits = 2, kLanes = 3 };
enum DeviceField : uint32_t { kType = 1, kId = 2 };

// Protobuf writes a negative int32 (and enum) sign-extended to 64 bits.
uint64_t Int32Bits(int32_t value) { return static_cast<uint64_t>(static_cast<int64_t>(value)); }
uint64_t Int64Bits(int64_t value) { return static_cast<uint64_t>(value); }

// proto3 leaves zero scalars and empty strings and repeated fields out;
// a set submessage is written even when empty.
size_t ScalarSize(uint64_t bits) { return bits == 0 ? 0 : 1 + VarintSize(bits); }
size_t LengthDelimitedSize(size_t payload) { return 1 + VarintSize(payload) + payload; }
size_t PackedPayloadSize(std::span<const int64_t> values) {
  size_t size = 0;
  for (int64_t value : values) size += VarintSize(Int64Bits(value));
  return size;
}

uint8_t* PutScalar(uint32_t field, uint64_t bits, uint8_t* out) {
  if (bits == 0) return out;
  *out++ = WireTag(field, kWireVarint);
  return out + PutVarint(bits, out);
}
uint8_t* PutLength(uint32_t field, size_t payload, uint8_t* out) {
  *out++ = WireTag(field, kWireLengthDelimited);
  return out + PutVarint(payload, out);
}
uint8_t* PutPacked(uint32_t field, std::span<const int64_t> values, size_t payload, uint8_t* out) {
  if (values.empty()) return out;
  out = PutLength(field, payload, out);
  for (int64_t value : values) out += PutVarint(Int64Bits(value), out);
  return out;
}

}  // namespace

TensorInfoWire::TensorInfoWire(const TensorVersion& version)
    : version_(version),
      open_leases_(version.open_leases.load(std::memory_order_relaxed)),
      created_unix_nanos_(absl::ToUnixNanos(version.created)) {
  const dlpack::TensorLayout& layout = version.layout;
  if (layout.strides.empty()) {
    compact_strides_.resize(layout.shape.size());
    dlpack::CompactStridesInto(layout.shape, std::span<int64_t>(compact_strides_));
    strides_ = compact_strides_;
  } else {
    strides_ = layout.strides;
  }
  dtype_size_ = ScalarSize(layout.dtype.code) + ScalarSize(layout.dtype.bits) +
                ScalarSize(layout.dtype.lanes);
  shape_size_ = PackedPayloadSize(layout.shape);
  strides_size_ = PackedPayloadSize(strides_);
  device_size_ = ScalarSize(Int32Bits(static_cast<int32_t>(layout.device.device_type))) +
                 ScalarSize(Int32Bits(layout.device.device_id));
  layout_size_ = LengthDelimitedSize(dtype_size_) +
                 (layout.shape.empty() ? 0 : LengthDelimitedSize(shape_size_)) +
                 (strides_.empty() ? 0 : LengthDelimitedSize(strides_size_)) +
                 ScalarSize(layout.byte_offset) + LengthDelimitedSize(device_size_);
  size_ = (version.name.empty() ? 0 : LengthDelimitedSize(version.name.size())) +
          ScalarSize(version.version) + LengthDelimitedSize(layout_size_) +
          ScalarSize(version.total_bytes) + ScalarSize(version.crc32c) +
          ScalarSize(Int64Bits(created_unix_nanos_)) + ScalarSize(open_leases_) +
          ScalarSize(Int32Bits(static_cast<int32_t>(version.retention)));
}

uint8_t* TensorInfoWire::Write(uint8_t* out) const {
  const TensorVersion& version = version_;
  const dlpack::TensorLayout& layout = version.layout;
  if (!version.name.empty()) {
    out = PutLength(kName, version.name.size(), out);
    std::memcpy(out, version.name.data(), version.name.size());
    out += version.name.size();
  }
  out = PutScalar(kVersion, version.version, out);
  out = PutLength(kLayout, layout_size_, out);
  out = PutLength(kDtype, dtype_size_, out);
  out = PutScalar(kCode, layout.dtype.code, out);
  out = PutScalar(kBits, layout.dtype.bits, out);
  out = PutScalar(kLanes, layout.dtype.lanes, out);
  out = PutPacked(kShape, layout.shape, shape_size_, out);
  out = PutPacked(kStrides, strides_, strides_size_, out);
  out = PutScalar(kByteOffset, layout.byte_offset, out);
  out = PutLength(kDevice, device_size_, out);
  out = PutScalar(kType, Int32Bits(static_cast<int32_t>(layout.device.device_type)), out);
  out = PutScalar(kId, Int32Bits(layout.device.device_id), out);
  out = PutScalar(kTotalBytes, version.total_bytes, out);
  out = PutScalar(kCrc32c, version.crc32c, out);
  out = PutScalar(kCreated, Int64Bits(created_unix_nanos_), out);
  out = PutScalar(kOpenLeases, open_leases_, out);
  out = PutScalar(kRetention, Int32Bits(static_cast<int32_t>(version.retention)), out);
  return out;
}

grpc::ByteBuffer EncodeStatResponse(const TensorVersion& version) {
  constexpr uint32_t kInfo = 1;  // StatResponse.info
  const TensorInfoWire info(version);
  grpc::Slice slice(LengthDelimitedSize(info.size()));
  uint8_t* out = PutLength(kInfo, info.size(), const_cast<uint8_t*>(slice.begin()));
  info.Write(out);
  return grpc::ByteBuffer(&slice, 1);
}

FetchHeaderWire::FetchHeaderWire(const TensorVersion& version, uint64_t offset, uint64_t length,
                                 bool split)
    : info_(version), offset_(offset), length_(length), split_(split) {
  range_size_ = ScalarSize(offset) + ScalarSize(length);
  size_ = LengthDelimitedSize(info_.size()) + LengthDelimitedSize(range_size_) + ScalarSize(split);
}

uint8_t* FetchHeaderWire::Write(uint8_t* out) const {
  // FetchHeader: info = 1, range = 2 (offset = 1, length = 2), split = 4.
  out = PutLength(1, info_.size(), out);
  out = info_.Write(out);
  out = PutLength(2, range_size_, out);
  out = PutScalar(1, offset_, out);
  out = PutScalar(2, length_, out);
  return PutScalar(4, split_, out);
}

}  // namespace tensord
