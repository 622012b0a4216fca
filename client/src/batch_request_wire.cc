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

}  // namespace

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
