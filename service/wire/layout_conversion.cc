#include "service/wire/layout_conversion.h"

#include <limits>
#include <span>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"

namespace tensord {

absl::StatusOr<dlpack::TensorLayout> LayoutFromWire(WireLayout wire) {
  if (!wire.has_dtype) return absl::InvalidArgumentError("layout.dtype is missing");
  if (wire.dtype_code > std::numeric_limits<uint8_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout.dtype.code ", wire.dtype_code, " is not a DLPack type code"));
  }
  if (wire.dtype_bits == 0 || wire.dtype_bits > std::numeric_limits<uint8_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout.dtype.bits ", wire.dtype_bits, " is outside 1..255"));
  }
  if (wire.dtype_lanes > std::numeric_limits<uint16_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout.dtype.lanes ", wire.dtype_lanes, " is outside 1..65535"));
  }
  if (wire.shape.size() > static_cast<size_t>(dlpack::kMaxDims)) {
    return absl::InvalidArgumentError(absl::StrCat("layout.shape has ", wire.shape.size(),
                                                   " dimensions; the limit is ", dlpack::kMaxDims));
  }
  if (!wire.strides.empty() && wire.strides.size() != wire.shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat("layout.strides has ", wire.strides.size(),
                                                   " entries but layout.shape has ",
                                                   wire.shape.size()));
  }
  dlpack::TensorLayout layout;
  layout.dtype =
      DLDataType{static_cast<uint8_t>(wire.dtype_code), static_cast<uint8_t>(wire.dtype_bits),
                 static_cast<uint16_t>(wire.dtype_lanes == 0 ? 1 : wire.dtype_lanes)};
  TENSORD_RETURN_IF_ERROR(dlpack::ValidateDataType(layout.dtype));
  layout.shape = std::move(wire.shape);
  layout.strides = std::move(wire.strides);
  layout.byte_offset = wire.byte_offset;
  if (wire.has_device) {
    const int32_t type = wire.device_type;
    // Only values the installed DLDeviceType enum declares may be stored in
    // it (anything else is undefined behaviour); 0 means unset, i.e. CPU.
    const bool known =
        type == 0 || (type >= kDLCPU && type <= kDLCUDAManaged && type != 5 && type != 6);
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout.device.type ", type, " is not a DLPack device type"));
    }
    if (wire.device_id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout.device.id ", wire.device_id, " is negative"));
    }
    layout.device = DLDevice{type == 0 ? kDLCPU : static_cast<DLDeviceType>(type), wire.device_id};
  }
  return layout;
}

WireLayout WireLayoutOf(const v1::TensorLayout& proto) {
  WireLayout wire;
  wire.has_dtype = proto.has_dtype();
  wire.dtype_code = proto.dtype().code();
  wire.dtype_bits = proto.dtype().bits();
  wire.dtype_lanes = proto.dtype().lanes();
  wire.shape.assign(proto.shape().begin(), proto.shape().end());
  wire.strides.assign(proto.strides().begin(), proto.strides().end());
  wire.byte_offset = proto.byte_offset();
  wire.has_device = proto.has_device();
  wire.device_type = proto.device().type();
  wire.device_id = proto.device().id();
  return wire;
}

absl::StatusOr<dlpack::TensorLayout> LayoutFromProto(const v1::TensorLayout& proto) {
  return LayoutFromWire(WireLayoutOf(proto));
}

void LayoutToProto(const dlpack::TensorLayout& layout, v1::TensorLayout* proto) {
  v1::DataType* dtype = proto->mutable_dtype();
  dtype->set_code(layout.dtype.code);
  dtype->set_bits(layout.dtype.bits);
  dtype->set_lanes(layout.dtype.lanes);
  proto->mutable_shape()->Assign(layout.shape.begin(), layout.shape.end());
  // Compact strides are written in place: no vector per message.
  if (!layout.strides.empty()) {
    proto->mutable_strides()->Assign(layout.strides.begin(), layout.strides.end());
  } else {
    google::protobuf::RepeatedField<int64_t>& strides = *proto->mutable_strides();
    strides.Resize(static_cast<int>(layout.shape.size()), 0);
    dlpack::CompactStridesInto(layout.shape,
                               std::span<int64_t>(strides.mutable_data(), layout.shape.size()));
  }
  proto->set_byte_offset(layout.byte_offset);
  proto->mutable_device()->set_type(static_cast<int32_t>(layout.device.device_type));
  proto->mutable_device()->set_id(layout.device.device_id);
}

}  // namespace tensord
