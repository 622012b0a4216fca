// Whether a PutHeader parsed by hand (service/wire/batch_put_items.h), or a
// put_many request (service/wire/wire_requests.h), holds what the generated
// parser read, field by field: the two forms differ only in what means
// nothing (an empty layout present or absent, unknown fields kept by
// protobuf). For the fuzz targets and unit tests of those parsers.
#ifndef TENSORD_TESTS_FUZZ_SAME_PUT_HEADER_H_
#define TENSORD_TESTS_FUZZ_SAME_PUT_HEADER_H_

#include "service/wire/batch_put_items.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/wire_requests.h"
#include "tensord/v1/handoff.pb.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {

inline bool SamePutHeader(const WirePutHeader& wire, const v1::PutHeader& proto) {
  const bool same_part = wire.part.has_value() == proto.has_part() &&
                         (!proto.has_part() || (wire.part->upload_id == proto.part().upload_id() &&
                                                wire.part->parts == proto.part().parts() &&
                                                wire.part->offset == proto.part().offset() &&
                                                wire.part->length == proto.part().length()));
  return wire.name == proto.name() && wire.layout == WireLayoutOf(proto.layout()) &&
         wire.total_bytes == proto.total_bytes() && wire.crc32c.has_value() == proto.has_crc32c() &&
         (!proto.has_crc32c() || *wire.crc32c == proto.crc32c()) &&
         wire.retention == static_cast<int32_t>(proto.retention()) &&
         wire.replicas == proto.replicas() && same_part;
}

inline bool SamePutManyItem(const WirePutManyItem& wire, const v1::PutManyItem& proto) {
  return wire.name == proto.name() && wire.layout == WireLayoutOf(proto.layout()) &&
         wire.total_bytes == proto.total_bytes() &&
         wire.retention == static_cast<int32_t>(proto.retention()) &&
         wire.crc32c.has_value() == proto.has_crc32c() &&
         (!proto.has_crc32c() || *wire.crc32c == proto.crc32c()) && wire.offset == proto.offset();
}

// `proto` must be of kind put_many.
inline bool SamePutMany(const WirePutManyRequest& wire, const v1::HandoffRequest& proto) {
  if (proto.kind_case() != v1::HandoffRequest::kPutMany || wire.request_id != proto.request_id() ||
      wire.atomic != proto.put_many().atomic() ||
      wire.items.size() != static_cast<size_t>(proto.put_many().items_size()) ||
      wire.release_lease_ids.size() != static_cast<size_t>(proto.release_lease_ids_size())) {
    return false;
  }
  for (size_t i = 0; i < wire.release_lease_ids.size(); ++i) {
    if (wire.release_lease_ids[i] != proto.release_lease_ids(static_cast<int>(i))) return false;
  }
  for (size_t i = 0; i < wire.items.size(); ++i) {
    if (!SamePutManyItem(wire.items[i], proto.put_many().items(static_cast<int>(i)))) return false;
  }
  return true;
}

}  // namespace tensord

#endif  // TENSORD_TESTS_FUZZ_SAME_PUT_HEADER_H_
