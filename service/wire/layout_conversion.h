// tensord.v1.TensorLayout <-> dlpack::TensorLayout.
#ifndef TENSORD_SERVICE_WIRE_LAYOUT_CONVERSION_H_
#define TENSORD_SERVICE_WIRE_LAYOUT_CONVERSION_H_

#include "absl/status/statusor.h"
#include "service/dlpack/tensor_layout.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/v1/tensor.pb.h"

namespace tensord {

// Range-checks the wire integers (code, bits and lanes must fit DLDataType,
// ndim <= kMaxDims, strides count matches shape) and fills defaults: lanes 0
// -> 1, unset device -> CPU 0. Does not check that the layout fits a buffer.
// Errors are INVALID_ARGUMENT naming the field ("layout.dtype.bits is 300").
absl::StatusOr<dlpack::TensorLayout> LayoutFromProto(const v1::TensorLayout& proto);
// The same checks on a layout parsed by hand (wire_tensor_info.h).
absl::StatusOr<dlpack::TensorLayout> LayoutFromWire(WireLayout wire);
// The fields of `proto`, as ParseWire* would give them.
WireLayout WireLayoutOf(const v1::TensorLayout& proto);

// Strides are always written out (compact ones when the layout has none).
void LayoutToProto(const dlpack::TensorLayout& layout, v1::TensorLayout* proto);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_LAYOUT_CONVERSION_H_
