#include "service/wire/layout_conversion.h"

#include <limits>
#include <span>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"

namespace tensord {

absl::StatusOr<dlpack::TensorLayout> LayoutFromProto(const v1::TensorLayout& proto) {
  const v1::DataType& dtype = proto.dtype();
  if (!proto.has_dtype()) return absl::InvalidArgumentError("layout.dtype is missing");
  if (dtype.code() > std::numeric_limits<uint8_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout.dtype.code ", dtype.code(), " is not a DLPack type code"));
  }
  if (dtype.bits() == 0 || dtype.bits() > std::numeric_limits<uint8_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout.dtype.bits ", dtype.bits(), " is outside 1..255"));
  }
  if (dtype.lanes() > std::numeric_limits<uint16_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout.dtype.lanes ", dtype.lanes(), " is outside 1..65535"));
  }
  if (proto.shape_size() > dlpack::kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat("layout.shape has ", proto.shape_size(),
                                                   " dimensions; the limit is ", dlpack::kMaxDims));
  }
  if (proto.strides_size() != 0 && proto.strides_size() != proto.shape_size()) {
    return absl::InvalidArgumentError(absl::StrCat("layout.strides has ", proto.strides_size(),
                                                   " entries but layout.shape has ",
                                                   proto.shape_size()));
  }
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{static_cast<uint8_t>(dtype.code()), static_cast<uint8_t>(dtype.bits()),
                            static_cast<uint16_t>(dtype.lanes() == 0 ? 1 : dtype.lanes())};
  TENSORD_RETURN_IF_ERROR(dlpack::ValidateDataType(layout.dtype));
  layout.shape.assign(proto.shape().begin(), proto.shape().end());
  layout.strides.assign(proto.strides().begin(), proto.strides().end());
  layout.byte_offset = proto.byte_offset();
  if (proto.has_device()) {
    const int32_t type = proto.device().type();
    // Only values the installed DLDeviceType enum declares may be stored in
    // it (anything else is undefined behaviour); 0 means unset, i.e. CPU.
    const bool known = type == 0 || (type >= kDLCPU && type <= kDLCUDAManaged && type != 5 && type != 6);
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout.device.type ", type, " is not a DLPack device type"));
    }
    if (proto.device().id() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout.device.id ", proto.device().id(), " is negative"));
    }
    layout.device = DLDevice{type == 0 ? kDLCPU : static_cast<DLDeviceType>(type), proto.device().id()};
  }
  return layout;
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
