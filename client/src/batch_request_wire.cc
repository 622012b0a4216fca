#include "client/src/batch_request_wire.h"

#include <grpcpp/support/slice.h>

#include <cassert>
#include <cstring>

#include "service/wire/varint.h"

namespace tensord {
namespace {

// Field numbers of handoff.proto, tensor.proto and tensor_service.proto.
enum BatchRequestWireField : uint32_t {
  kHandoffRequestAcquireMany = 8,
  kHandoffRequestPutMany = 12,
  kPutManyItems = 1,
  kPutManyAtomic = 2,
  kPutManyItemName = 1,
  kPutManyItemLayout = 2,
  kPutManyItemTotalBytes = 3,
  kPutManyItemRetention = 4,
  kPutManyItemCrc32c = 5,
  kPutManyItemOffset = 6,
  kLayoutDtype = 1,
  kLayoutShape = 2,
  kLayoutStrides = 3,
  kLayoutByteOffset = 4,
  kLayoutDevice = 5,
  kDataTypeCode = 1,
  kDataTypeBits = 2,
  kDataTypeLanes = 3,
  kDeviceType = 1,
  kDeviceId = 2,
  kAcquireManyItems = 1,
  kAcquireManyHostOnly = 4,
  kAcquireManyAcceptsArenaSlots = 5,
  kAcquireManyMappedArenaIds = 6,
  kNameVersionName = 1,
  kNameVersionVersion = 2,
  kBatchFetchItems = 1,
  kBatchFetchPrefix = 2,
  kBatchFetchGroupVersion = 3,
  kBatchFetchClusterGroup = 4,
  kPutHeaderName = 1,
  kPutHeaderLayout = 2,
  kPutHeaderTotalBytes = 3,
  kPutHeaderCrc32c = 4,
  kPutHeaderRetention = 5,
  kBatchPutRequestHeader = 1,
};

size_t NameVersionSize(const TensorRef& item) {
  return (item.name.empty() ? 0 : LengthDelimitedFieldSize(item.name.size())) +
         ScalarFieldSize(item.version);
}

// A repeated NameVersion field's element: tag, length, name, version.
uint8_t* PutNameVersion(uint32_t field, const TensorRef& item, uint8_t* out) {
  out = PutLengthPrefix(field, NameVersionSize(item), out);
  out = PutBytesField(kNameVersionName, item.name, out);
  return PutScalarField(kNameVersionVersion, item.version, out);
}

size_t PackedVarintsSize(std::span<const uint64_t> values) {
  size_t size = 0;
  for (uint64_t value : values) size += VarintSize(value);
  return size;
}

size_t PackedInt64sSize(std::span<const int64_t> values) {
  size_t size = 0;
  for (int64_t value : values) size += VarintSize(static_cast<uint64_t>(value));
  return size;
}

uint8_t* PutPackedInt64s(uint32_t field, std::span<const int64_t> values, size_t payload,
                         uint8_t* out) {
  if (values.empty()) return out;
  out = PutLengthPrefix(field, payload, out);
  for (int64_t value : values) out += PutVarint(static_cast<uint64_t>(value), out);
  return out;
}

// A v1::TensorLayout's payload sizes: the message's and its parts'.
struct LayoutSizes {
  size_t dtype = 0;
  size_t shape = 0;
  size_t strides = 0;
  size_t device = 0;
  size_t total = 0;
};

// Whether a layout's strides are written: a BatchPut item's header
// describes its compact bytes and leaves them out.
enum class Strides { kWritten, kLeftOut };

LayoutSizes LayoutSizesOf(const dlpack::TensorLayout& layout,
                          Strides strides_written = Strides::kWritten) {
  const std::span<const int64_t> strides = strides_written == Strides::kWritten
                                               ? std::span<const int64_t>(layout.strides)
                                               : std::span<const int64_t>();
  LayoutSizes sizes;
  sizes.dtype = ScalarFieldSize(layout.dtype.code) + ScalarFieldSize(layout.dtype.bits) +
                ScalarFieldSize(layout.dtype.lanes);
  sizes.shape = PackedInt64sSize(layout.shape);
  sizes.strides = PackedInt64sSize(strides);
  sizes.device = ScalarFieldSize(Int32Bits(static_cast<int32_t>(layout.device.device_type))) +
                 ScalarFieldSize(Int32Bits(layout.device.device_id));
  sizes.total = LengthDelimitedFieldSize(sizes.dtype) +
                (layout.shape.empty() ? 0 : LengthDelimitedFieldSize(sizes.shape)) +
                (strides.empty() ? 0 : LengthDelimitedFieldSize(sizes.strides)) +
                ScalarFieldSize(layout.byte_offset) + LengthDelimitedFieldSize(sizes.device);
  return sizes;
}

// The layout's payload, its fields in number order; dtype and device are
// always written, as LayoutToProto sets them.
uint8_t* PutLayout(const dlpack::TensorLayout& layout, const LayoutSizes& sizes, uint8_t* out,
                   Strides strides_written = Strides::kWritten) {
  out = PutLengthPrefix(kLayoutDtype, sizes.dtype, out);
  out = PutScalarField(kDataTypeCode, layout.dtype.code, out);
  out = PutScalarField(kDataTypeBits, layout.dtype.bits, out);
  out = PutScalarField(kDataTypeLanes, layout.dtype.lanes, out);
  out = PutPackedInt64s(kLayoutShape, layout.shape, sizes.shape, out);
  if (strides_written == Strides::kWritten) {
    out = PutPackedInt64s(kLayoutStrides, layout.strides, sizes.strides, out);
  }
  out = PutScalarField(kLayoutByteOffset, layout.byte_offset, out);
  out = PutLengthPrefix(kLayoutDevice, sizes.device, out);
  out =
      PutScalarField(kDeviceType, Int32Bits(static_cast<int32_t>(layout.device.device_type)), out);
  return PutScalarField(kDeviceId, Int32Bits(layout.device.device_id), out);
}

size_t PutManyItemPayloadSize(const PutManyItemWire& item, const LayoutSizes& layout) {
  return (item.name.empty() ? 0 : LengthDelimitedFieldSize(item.name.size())) +
         LengthDelimitedFieldSize(layout.total) + ScalarFieldSize(item.total_bytes) +
         ScalarFieldSize(Int32Bits(item.retention)) +
         // proto3 `optional`: written when set, even 0.
         (item.crc32c.has_value() ? 1 + VarintSize(*item.crc32c) : 0) +
         ScalarFieldSize(item.offset);
}

uint8_t* PutPutManyItem(const PutManyItemWire& item, uint8_t* out) {
  const LayoutSizes layout = LayoutSizesOf(*item.layout);
  out = PutLengthPrefix(kPutManyItems, PutManyItemPayloadSize(item, layout), out);
  out = PutBytesField(kPutManyItemName, item.name, out);
  out = PutLengthPrefix(kPutManyItemLayout, layout.total, out);
  out = PutLayout(*item.layout, layout, out);
  out = PutScalarField(kPutManyItemTotalBytes, item.total_bytes, out);
  out = PutScalarField(kPutManyItemRetention, Int32Bits(item.retention), out);
  if (item.crc32c.has_value()) {
    *out++ = WireTag(kPutManyItemCrc32c, kWireVarint);
    out += PutVarint(*item.crc32c, out);
  }
  return PutScalarField(kPutManyItemOffset, item.offset, out);
}

size_t PutHeaderPayloadSize(const PutHeaderWire& header, const LayoutSizes& layout) {
  return (header.name.empty() ? 0 : LengthDelimitedFieldSize(header.name.size())) +
         LengthDelimitedFieldSize(layout.total) + ScalarFieldSize(header.total_bytes) +
         // proto3 `optional`: written when set, even 0.
         (header.crc32c.has_value() ? 1 + VarintSize(*header.crc32c) : 0) +
         ScalarFieldSize(Int32Bits(header.retention));
}

}  // namespace

size_t PutHeaderSize(const PutHeaderWire& header) {
  return PutHeaderPayloadSize(header, LayoutSizesOf(*header.layout, Strides::kLeftOut));
}

uint8_t* PutPutHeader(const PutHeaderWire& header, size_t size, uint8_t* out) {
  [[maybe_unused]] uint8_t* const start = out;
  const LayoutSizes layout = LayoutSizesOf(*header.layout, Strides::kLeftOut);
  out = PutBytesField(kPutHeaderName, header.name, out);
  out = PutLengthPrefix(kPutHeaderLayout, layout.total, out);
  out = PutLayout(*header.layout, layout, out, Strides::kLeftOut);
  out = PutScalarField(kPutHeaderTotalBytes, header.total_bytes, out);
  if (header.crc32c.has_value()) {
    *out++ = WireTag(kPutHeaderCrc32c, kWireVarint);
    out += PutVarint(*header.crc32c, out);
  }
  out = PutScalarField(kPutHeaderRetention, Int32Bits(header.retention), out);
  assert(out == start + size);  // PutHeaderSize matches the writes
  return out;
}

grpc::ByteBuffer EncodeBatchPutHeaderRequest(const PutHeaderWire& header) {
  const size_t size = PutHeaderSize(header);
  grpc::Slice slice(LengthDelimitedFieldSize(size));
  auto* const start = const_cast<uint8_t*>(slice.begin());
  PutPutHeader(header, size, PutLengthPrefix(kBatchPutRequestHeader, size, start));
  return grpc::ByteBuffer(&slice, 1);
}

size_t NameVersionItemSize(const TensorRef& item) {
  return LengthDelimitedFieldSize(NameVersionSize(item));
}

void AppendAcquireManyField(const AcquireManyByName& request, std::string& out) {
  size_t payload = 0;
  for (const TensorRef& item : request.items) payload += NameVersionItemSize(item);
  payload += ScalarFieldSize(request.host_only ? 1 : 0);
  payload += ScalarFieldSize(request.accepts_arena_slots ? 1 : 0);
  const size_t ids_size = PackedVarintsSize(request.mapped_arena_ids);
  if (ids_size > 0) payload += LengthDelimitedFieldSize(ids_size);

  const size_t at = out.size();
  out.resize(at + LengthDelimitedFieldSize(payload));
  uint8_t* const start = reinterpret_cast<uint8_t*>(out.data()) + at;
  uint8_t* write = PutLengthPrefix(kHandoffRequestAcquireMany, payload, start);
  // In field-number order, as the generated serializer writes them.
  for (const TensorRef& item : request.items)
    write = PutNameVersion(kAcquireManyItems, item, write);
  write = PutScalarField(kAcquireManyHostOnly, request.host_only ? 1 : 0, write);
  write = PutScalarField(kAcquireManyAcceptsArenaSlots, request.accepts_arena_slots ? 1 : 0, write);
  if (ids_size > 0) {
    write = PutLengthPrefix(kAcquireManyMappedArenaIds, ids_size, write);
    for (uint64_t id : request.mapped_arena_ids) write += PutVarint(id, write);
  }
  assert(write == start + LengthDelimitedFieldSize(payload));  // sizes above match the writes
}

size_t PutManyItemSize(const PutManyItemWire& item) {
  return LengthDelimitedFieldSize(PutManyItemPayloadSize(item, LayoutSizesOf(*item.layout)));
}

void AppendPutManyField(std::span<const PutManyItemWire> items, bool atomic, std::string& out) {
  size_t payload = ScalarFieldSize(atomic ? 1 : 0);
  for (const PutManyItemWire& item : items) payload += PutManyItemSize(item);
  const size_t at = out.size();
  out.resize(at + LengthDelimitedFieldSize(payload));
  uint8_t* const start = reinterpret_cast<uint8_t*>(out.data()) + at;
  uint8_t* write = PutLengthPrefix(kHandoffRequestPutMany, payload, start);
  for (const PutManyItemWire& item : items) write = PutPutManyItem(item, write);
  write = PutScalarField(kPutManyAtomic, atomic ? 1 : 0, write);
  assert(write == start + LengthDelimitedFieldSize(payload));  // sizes above match the writes
}

grpc::ByteBuffer EncodeBatchFetchRequest(const BatchSelection& selection) {
  // Both repeated fields' elements are framed alike (field 1 each).
  size_t size = 0;
  for (const TensorRef& item : selection.items) size += NameVersionItemSize(item);
  // `prefix` is proto3 `optional`: written when set, even empty.
  if (selection.prefix.has_value()) size += LengthDelimitedFieldSize(selection.prefix->size());
  size += ScalarFieldSize(selection.group_version);
  size += ScalarFieldSize(selection.cluster_group);

  grpc::Slice slice(size);
  auto* const start = const_cast<uint8_t*>(slice.begin());
  uint8_t* write = start;
  for (const TensorRef& item : selection.items)
    write = PutNameVersion(kBatchFetchItems, item, write);
  if (selection.prefix.has_value()) {
    write = PutLengthPrefix(kBatchFetchPrefix, selection.prefix->size(), write);
    std::memcpy(write, selection.prefix->data(), selection.prefix->size());
    write += selection.prefix->size();
  }
  write = PutScalarField(kBatchFetchGroupVersion, selection.group_version, write);
  write = PutScalarField(kBatchFetchClusterGroup, selection.cluster_group, write);
  assert(write == start + size);  // sizes above match the writes
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace tensord
