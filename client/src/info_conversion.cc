#include "client/src/info_conversion.h"

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/tensor_info_fields.h"

namespace tensord {
namespace {

// A retention this client does not know (a newer server) reads as the
// durable default rather than failing the call.
Retention RetentionOfWire(int32_t retention) {
  return retention == v1::RETENTION_PINNED  ? Retention::kPinned
         : retention == v1::RETENTION_CACHE ? Retention::kCache
                                            : Retention::kDefault;
}

}  // namespace

absl::Status InfoFromWire(WireTensorInfo& wire, TensorInfo& info) {
  if (!wire.node.empty()) {
    // From the cluster's etcd name records (cluster listings and watches),
    // which hold no layout: only what a record holds.
    info.name = std::move(wire.name);
    info.version = wire.version;
    info.total_bytes = wire.total_bytes;
    info.crc32c = wire.crc32c;
    info.node = std::move(wire.node);
    return absl::OkStatus();
  }
  absl::StatusOr<dlpack::TensorLayout> layout = LayoutFromWire(std::move(wire.layout));
  if (layout.ok()) {
    if (absl::Status fits = dlpack::ValidateLayoutFits(*layout, wire.total_bytes); !fits.ok()) {
      layout = fits;
    }
  }
  if (!layout.ok()) {
    return absl::InternalError(absl::StrCat("server sent an invalid layout for '", wire.name,
                                            "': ", layout.status().message()));
  }
  info.name = std::move(wire.name);
  info.version = wire.version;
  info.dtype = layout->dtype;
  // Moved, not copied: this runs once per Stat and per fetch header.
  info.strides =
      layout->strides.empty() ? dlpack::CompactStrides(layout->shape) : std::move(layout->strides);
  info.shape = std::move(layout->shape);
  info.byte_offset = layout->byte_offset;
  info.device = layout->device;
  info.total_bytes = wire.total_bytes;
  info.crc32c = wire.crc32c;
  info.created = absl::FromUnixNanos(wire.created_unix_nanos);
  info.open_leases = wire.open_leases;
  info.retention = RetentionOfWire(wire.retention);
  return absl::OkStatus();
}

TensorInfo InfoOfPut(std::string name, const dlpack::TensorLayout& compact, uint64_t total_bytes,
                     int32_t wire_retention, uint64_t version, uint32_t crc32c,
                     int64_t created_unix_nanos) {
  TensorInfo info;
  info.name = std::move(name);
  info.version = version;
  info.dtype = compact.dtype;
  info.shape = compact.shape;
  info.strides = dlpack::CompactStrides(compact.shape);
  info.byte_offset = compact.byte_offset;
  info.device = compact.device;
  info.total_bytes = total_bytes;
  info.crc32c = crc32c;
  info.created = absl::FromUnixNanos(created_unix_nanos);
  info.retention = RetentionOfWire(wire_retention);
  return info;
}

absl::StatusOr<TensorInfo> InfoFromWire(WireTensorInfo wire) {
  TensorInfo info;
  TENSORD_RETURN_IF_ERROR(InfoFromWire(wire, info));
  return info;
}

namespace {

// One generated field into its WireTensorInfo member.
template <typename Member, typename Value>
void Assign(Member& member, const Value& value) {
  member = value;
}
void Assign(WireLayout& member, const v1::TensorLayout& value) { member = WireLayoutOf(value); }

}  // namespace

WireTensorInfo WireInfoOf(const v1::TensorInfo& proto) {
  WireTensorInfo wire;
#define TENSORD_ASSIGN_INFO_FIELD(name, number, wire_type) Assign(wire.name, proto.name());
  TENSORD_TENSOR_INFO_FIELDS(TENSORD_ASSIGN_INFO_FIELD)
#undef TENSORD_ASSIGN_INFO_FIELD
  return wire;
}

absl::StatusOr<TensorInfo> InfoFromProto(const v1::TensorInfo& proto) {
  return InfoFromWire(WireInfoOf(proto));
}

dlpack::TensorLayout LayoutOfInfo(const TensorInfo& info) {
  return dlpack::TensorLayout{.dtype = info.dtype,
                              .shape = info.shape,
                              .strides = info.strides,
                              .byte_offset = info.byte_offset,
                              .device = info.device};
}

absl::Status CheckDestinationMatches(const dlpack::TensorLayout& destination,
                                     const TensorInfo& info) {
  if (dlpack::operator==(info.dtype, destination.dtype) && info.shape == destination.shape) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("destination ", dlpack::DescribeLayout(destination), " does not match tensor '",
                   info.name, "' ", dlpack::DescribeLayout(LayoutOfInfo(info))));
}

}  // namespace tensord
