#include "client/src/info_conversion.h"

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"
#include "service/wire/layout_conversion.h"

namespace tensord {

absl::StatusOr<TensorInfo> InfoFromWire(WireTensorInfo wire) {
  TensorInfo info;
  TENSORD_RETURN_IF_ERROR(InfoFromWire(std::move(wire), info));
  return info;
}

absl::Status InfoFromWire(WireTensorInfo&& wire, TensorInfo& out) {
  if (!wire.node.empty()) {
    // From the cluster directory (cluster listings and watches), which
    // knows no layout: only what it lists.
    out = TensorInfo{};
    out.name = std::move(wire.name);
    out.version = wire.version;
    out.total_bytes = wire.total_bytes;
    out.crc32c = wire.crc32c;
    out.node = std::move(wire.node);
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
  out.name = std::move(wire.name);
  out.version = wire.version;
  out.dtype = layout->dtype;
  // Moved, not copied: this runs once per Stat and per fetch header.
  out.strides = layout->strides.empty() ? dlpack::CompactStrides(layout->shape)
                                        : std::move(layout->strides);
  out.shape = std::move(layout->shape);
  out.byte_offset = layout->byte_offset;
  out.device = layout->device;
  out.total_bytes = wire.total_bytes;
  out.crc32c = wire.crc32c;
  out.created = absl::FromUnixNanos(wire.created_unix_nanos);
  out.open_leases = wire.open_leases;
  // A retention this client does not know (a newer server) reads as the
  // durable default rather than failing the call.
  out.retention = wire.retention == v1::RETENTION_PINNED  ? Retention::kPinned
                  : wire.retention == v1::RETENTION_CACHE ? Retention::kCache
                                                          : Retention::kDefault;
  out.node.clear();
  return absl::OkStatus();
}

WireTensorInfo WireInfoOf(const v1::TensorInfo& proto) {
  WireTensorInfo wire;
  wire.name = proto.name();
  wire.version = proto.version();
  wire.layout = WireLayoutOf(proto.layout());
  wire.total_bytes = proto.total_bytes();
  wire.crc32c = proto.crc32c();
  wire.created_unix_nanos = proto.created_unix_nanos();
  wire.open_leases = proto.open_leases();
  wire.retention = proto.retention();
  wire.node = proto.node();
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
  return absl::InvalidArgumentError(absl::StrCat("destination ", dlpack::DescribeLayout(destination),
                                                 " does not match tensor '", info.name, "' ",
                                                 dlpack::DescribeLayout(LayoutOfInfo(info))));
}

}  // namespace tensord
