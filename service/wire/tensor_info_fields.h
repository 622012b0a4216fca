// v1::TensorInfo's fields (proto/tensord/v1/tensor.proto), listed once for
// the hand-written codecs of the small calls: the reader
// (wire/wire_tensor_info.cc) and the conversion from the generated message
// (client/src/info_conversion.cc's WireInfoOf) are generated from this
// table, and the writer (transport/tensor_info_wire.cc) takes its field
// numbers from it. wire_tensor_info_test holds the table to the generated
// descriptor (every field, its number); tensor_info_wire_test and the
// wire_tensor_info fuzz target hold the codecs to the generated ones byte
// for byte. A new field: a line here and its WireTensorInfo member of the
// same name, then the writer.
#ifndef TENSORD_SERVICE_WIRE_TENSOR_INFO_FIELDS_H_
#define TENSORD_SERVICE_WIRE_TENSOR_INFO_FIELDS_H_

#include <cstdint>

#include "service/wire/varint.h"

// X(name, number, wire type): `name` is the field's name in tensor.proto,
// its accessor on v1::TensorInfo and its WireTensorInfo member.
#define TENSORD_TENSOR_INFO_FIELDS(X)   \
  X(name, 1, kWireLengthDelimited)      \
  X(version, 2, kWireVarint)            \
  X(layout, 3, kWireLengthDelimited)    \
  X(total_bytes, 4, kWireVarint)        \
  X(crc32c, 5, kWireVarint)             \
  X(created_unix_nanos, 6, kWireVarint) \
  X(open_leases, 7, kWireVarint)        \
  X(retention, 8, kWireVarint)          \
  X(node, 9, kWireLengthDelimited)

namespace tensord::tensor_info_field {

// tensor_info_field::open_leases == 7, and so on.
#define TENSORD_TENSOR_INFO_FIELD_NUMBER(name, number, wire_type) \
  inline constexpr uint32_t name = number;
TENSORD_TENSOR_INFO_FIELDS(TENSORD_TENSOR_INFO_FIELD_NUMBER)
#undef TENSORD_TENSOR_INFO_FIELD_NUMBER

}  // namespace tensord::tensor_info_field

#endif  // TENSORD_SERVICE_WIRE_TENSOR_INFO_FIELDS_H_
