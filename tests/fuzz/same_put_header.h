// Whether a PutHeader parsed by hand (service/wire/batch_put_items.h) holds
// what the generated parser read, field by field: the two forms differ only
// in what means nothing (an empty layout present or absent, unknown fields
// kept by protobuf). For the fuzz targets and unit tests of that parser.
#ifndef TENSORD_TESTS_FUZZ_SAME_PUT_HEADER_H_
#define TENSORD_TESTS_FUZZ_SAME_PUT_HEADER_H_

#include "service/wire/batch_put_items.h"
#include "service/wire/layout_conversion.h"
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

}  // namespace tensord

#endif  // TENSORD_TESTS_FUZZ_SAME_PUT_HEADER_H_
