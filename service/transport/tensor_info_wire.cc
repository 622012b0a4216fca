#include "service/transport/tensor_info_wire.h"

#include <cstring>

#include "absl/time/time.h"
#include "service/dlpack/tensor_layout.h"
#include "service/wire/tensor_info_fields.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// TensorInfo's numbers come from its table (wire/tensor_info_fields.h);
// the layout's, written only here, are tensor.proto's.
namespace field = tensor_info_field;
enum LayoutField : uint32_t { kDtype = 1, kShape = 2, kStrides = 3, kByteOffset = 4, kDevice = 5 };
enum DataTypeField : uint32_t { kCode = 1, kBits = 2, kLanes = 3 };
enum DeviceField : uint32_t { kType = 1, kId = 2 };

uint64_t Int64Bits(int64_t value) { return static_cast<uint64_t>(value); }

size_t PackedPayloadSize(std::span<const int64_t> values) {
  size_t size = 0;
  for (int64_t value : values) size += VarintSize(Int64Bits(value));
  return size;
}

uint8_t* PutPacked(uint32_t field, std::span<const int64_t> values, size_t payload, uint8_t* out) {
  if (values.empty()) return out;
  out = PutLengthPrefix(field, payload, out);
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
  dtype_size_ = ScalarFieldSize(layout.dtype.code) + ScalarFieldSize(layout.dtype.bits) +
                ScalarFieldSize(layout.dtype.lanes);
  shape_size_ = PackedPayloadSize(layout.shape);
  strides_size_ = PackedPayloadSize(strides_);
  device_size_ = ScalarFieldSize(Int32Bits(static_cast<int32_t>(layout.device.device_type))) +
                 ScalarFieldSize(Int32Bits(layout.device.device_id));
  layout_size_ = LengthDelimitedFieldSize(dtype_size_) +
                 (layout.shape.empty() ? 0 : LengthDelimitedFieldSize(shape_size_)) +
                 (strides_.empty() ? 0 : LengthDelimitedFieldSize(strides_size_)) +
                 ScalarFieldSize(layout.byte_offset) + LengthDelimitedFieldSize(device_size_);
  size_ = (version.name.empty() ? 0 : LengthDelimitedFieldSize(version.name.size())) +
          ScalarFieldSize(version.version) + LengthDelimitedFieldSize(layout_size_) +
          ScalarFieldSize(version.total_bytes) + ScalarFieldSize(version.crc32c) +
          ScalarFieldSize(Int64Bits(created_unix_nanos_)) + ScalarFieldSize(open_leases_) +
          ScalarFieldSize(Int32Bits(static_cast<int32_t>(version.retention)));
}

uint8_t* TensorInfoWire::Write(uint8_t* out) const {
  const TensorVersion& version = version_;
  const dlpack::TensorLayout& layout = version.layout;
  if (!version.name.empty()) {
    out = PutLengthPrefix(field::name, version.name.size(), out);
    std::memcpy(out, version.name.data(), version.name.size());
    out += version.name.size();
  }
  out = PutScalarField(field::version, version.version, out);
  out = PutLengthPrefix(field::layout, layout_size_, out);
  out = PutLengthPrefix(kDtype, dtype_size_, out);
  out = PutScalarField(kCode, layout.dtype.code, out);
  out = PutScalarField(kBits, layout.dtype.bits, out);
  out = PutScalarField(kLanes, layout.dtype.lanes, out);
  out = PutPacked(kShape, layout.shape, shape_size_, out);
  out = PutPacked(kStrides, strides_, strides_size_, out);
  out = PutScalarField(kByteOffset, layout.byte_offset, out);
  out = PutLengthPrefix(kDevice, device_size_, out);
  out = PutScalarField(kType, Int32Bits(static_cast<int32_t>(layout.device.device_type)), out);
  out = PutScalarField(kId, Int32Bits(layout.device.device_id), out);
  out = PutScalarField(field::total_bytes, version.total_bytes, out);
  out = PutScalarField(field::crc32c, version.crc32c, out);
  out = PutScalarField(field::created_unix_nanos, Int64Bits(created_unix_nanos_), out);
  out = PutScalarField(field::open_leases, open_leases_, out);
  out = PutScalarField(field::retention, Int32Bits(static_cast<int32_t>(version.retention)), out);
  return out;
}

grpc::ByteBuffer EncodeStatResponse(const TensorVersion& version) {
  constexpr uint32_t kInfo = 1;  // StatResponse.info
  const TensorInfoWire info(version);
  grpc::Slice slice(LengthDelimitedFieldSize(info.size()));
  uint8_t* out = PutLengthPrefix(kInfo, info.size(), const_cast<uint8_t*>(slice.begin()));
  info.Write(out);
  return grpc::ByteBuffer(&slice, 1);
}

FetchHeaderWire::FetchHeaderWire(const TensorVersion& version, uint64_t offset, uint64_t length,
                                 bool split)
    : info_(version), offset_(offset), length_(length), split_(split) {
  range_size_ = ScalarFieldSize(offset) + ScalarFieldSize(length);
  size_ = LengthDelimitedFieldSize(info_.size()) + LengthDelimitedFieldSize(range_size_) +
          ScalarFieldSize(split);
}

uint8_t* FetchHeaderWire::Write(uint8_t* out) const {
  // FetchHeader: info = 1, range = 2 (offset = 1, length = 2), split = 4.
  out = PutLengthPrefix(1, info_.size(), out);
  out = info_.Write(out);
  out = PutLengthPrefix(2, range_size_, out);
  out = PutScalarField(1, offset_, out);
  out = PutScalarField(2, length_, out);
  return PutScalarField(4, split_, out);
}

}  // namespace tensord
