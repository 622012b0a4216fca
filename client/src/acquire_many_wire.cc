#include "client/src/acquire_many_wire.h"

#include <cassert>

#include "service/wire/varint.h"

namespace tensord {
namespace {

// Field numbers of handoff.proto and tensor.proto.
enum AcquireManyWireField : uint32_t {
  kHandoffRequestAcquireMany = 8,
  kAcquireManyItems = 1,
  kAcquireManyHostOnly = 4,
  kAcquireManyAcceptsArenaSlots = 5,
  kAcquireManyMappedArenaIds = 6,
  kNameVersionName = 1,
  kNameVersionVersion = 2,
};

size_t NameVersionSize(const TensorRef& item) {
  return (item.name.empty() ? 0 : LengthDelimitedFieldSize(item.name.size())) +
         ScalarFieldSize(item.version);
}

size_t PackedVarintsSize(std::span<const uint64_t> values) {
  size_t size = 0;
  for (uint64_t value : values) size += VarintSize(value);
  return size;
}

}  // namespace

size_t AcquireManyItemSize(const TensorRef& item) {
  return LengthDelimitedFieldSize(NameVersionSize(item));
}

void AppendAcquireManyField(const AcquireManyByName& request, std::string& out) {
  size_t payload = 0;
  for (const TensorRef& item : request.items) payload += AcquireManyItemSize(item);
  payload += ScalarFieldSize(request.host_only ? 1 : 0);
  payload += ScalarFieldSize(request.accepts_arena_slots ? 1 : 0);
  const size_t ids_size = PackedVarintsSize(request.mapped_arena_ids);
  if (ids_size > 0) payload += LengthDelimitedFieldSize(ids_size);

  const size_t at = out.size();
  out.resize(at + LengthDelimitedFieldSize(payload));
  uint8_t* const start = reinterpret_cast<uint8_t*>(out.data()) + at;
  uint8_t* write = PutLengthPrefix(kHandoffRequestAcquireMany, payload, start);
  // In field-number order, as the generated serializer writes them.
  for (const TensorRef& item : request.items) {
    write = PutLengthPrefix(kAcquireManyItems, NameVersionSize(item), write);
    write = PutBytesField(kNameVersionName, item.name, write);
    write = PutScalarField(kNameVersionVersion, item.version, write);
  }
  write = PutScalarField(kAcquireManyHostOnly, request.host_only ? 1 : 0, write);
  write = PutScalarField(kAcquireManyAcceptsArenaSlots, request.accepts_arena_slots ? 1 : 0, write);
  if (ids_size > 0) {
    write = PutLengthPrefix(kAcquireManyMappedArenaIds, ids_size, write);
    for (uint64_t id : request.mapped_arena_ids) write += PutVarint(id, write);
  }
  assert(write == start + LengthDelimitedFieldSize(payload));  // sizes above match the writes
}

}  // namespace tensord
