#include "service/transport/request_validation.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"
#include "service/dlpack/data_type.h"
#include "service/wire/batch_put_items.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/wire_tensor_info.h"

namespace tensord {

absl::StatusOr<Retention> RetentionFromProto(int retention) {
  switch (retention) {
    case v1::RETENTION_DEFAULT: return Retention::kDefault;
    case v1::RETENTION_PINNED: return Retention::kPinned;
    case v1::RETENTION_CACHE: return Retention::kCache;
    default: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("retention ", retention, " is not one of 0 (default), 1 (pinned), 2 (cache)"));
}

namespace {

absl::StatusOr<ValidatedPutPart> ValidatePutPart(absl::string_view id, uint32_t parts,
                                                 uint64_t offset, uint64_t length,
                                                 const ValidatedPut& put) {
  const bool id_ok = id.size() == 32 && absl::c_all_of(id, [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
  if (!id_ok) {
    return absl::InvalidArgumentError(absl::StrCat("put of '", put.name, "': part.upload_id '",
                                                   absl::CHexEscape(id.substr(0, 64)),
                                                   "' is not 32 lowercase hex digits"));
  }
  if (parts < 2 || parts > kMaxPutParts) {
    return absl::InvalidArgumentError(absl::StrCat("put of '", put.name, "' in part.parts ", parts,
                                                   " streams; the limit is 2..", kMaxPutParts));
  }
  if (length == 0 || offset > put.total_bytes || length > put.total_bytes - offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("put of '", put.name, "': part [", offset, ", +", length,
                     ") is empty or reaches beyond total_bytes ", put.total_bytes));
  }
  if (put.layout.device.device_type != kDLCPU) {
    // A device put streams through one staged upload, in order.
    return absl::InvalidArgumentError(absl::StrCat(
        "put of '", put.name, "' into device memory (kDLCUDA ", put.layout.device.device_id,
        ") cannot be split into parts; send it in one stream"));
  }
  return ValidatedPutPart{std::string(id), parts, offset, length};
}

}  // namespace

absl::StatusOr<ValidatedPut> ValidatePutHeader(const v1::PutHeader& header,
                                               uint64_t max_tensor_bytes) {
  TENSORD_ASSIGN_OR_RETURN(ValidatedPut put,
                           ValidatePutFields(header.name(), header.layout(), header.total_bytes(),
                                             header.retention(), max_tensor_bytes));
  if (header.has_crc32c()) put.crc32c = header.crc32c();
  if (header.has_part()) {
    const v1::PutPart& part = header.part();
    TENSORD_ASSIGN_OR_RETURN(put.part, ValidatePutPart(part.upload_id(), part.parts(),
                                                       part.offset(), part.length(), put));
  }
  return put;
}

absl::StatusOr<ValidatedPut> ValidatePutHeader(WirePutHeader& header, uint64_t max_tensor_bytes) {
  TENSORD_ASSIGN_OR_RETURN(
      ValidatedPut put, ValidatePutFields(header.name, std::move(header.layout), header.total_bytes,
                                          header.retention, max_tensor_bytes));
  put.crc32c = header.crc32c;
  if (header.part.has_value()) {
    const WirePutPart& part = *header.part;
    TENSORD_ASSIGN_OR_RETURN(
        put.part, ValidatePutPart(part.upload_id, part.parts, part.offset, part.length, put));
  }
  return put;
}

absl::StatusOr<ValidatedPut> ValidatePutFields(const std::string& name,
                                               const v1::TensorLayout& layout, uint64_t total_bytes,
                                               int retention, uint64_t max_tensor_bytes) {
  return ValidatePutFields(absl::string_view(name), WireLayoutOf(layout), total_bytes, retention,
                           max_tensor_bytes);
}

absl::StatusOr<ValidatedPut> ValidatePutFields(absl::string_view name, WireLayout layout,
                                               uint64_t total_bytes, int retention,
                                               uint64_t max_tensor_bytes) {
  ValidatedPut put;
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_ASSIGN_OR_RETURN(put.retention, RetentionFromProto(retention));
  put.name = std::string(name);
  TENSORD_ASSIGN_OR_RETURN(put.layout, LayoutFromWire(std::move(layout)));
  // Pinned host memory (kDLCUDAHost) is host memory to the server: stored
  // and reported as kDLCPU. kDLCUDA ids are checked by the registry, which
  // knows the device backend.
  if (put.layout.device.device_type == kDLCUDAHost) put.layout.device = DLDevice{kDLCPU, 0};
  const bool host = put.layout.device.device_type == kDLCPU && put.layout.device.device_id == 0;
  if (!host && put.layout.device.device_type != kDLCUDA) {
    return absl::FailedPreconditionError(absl::StrCat(
        "layout.device {type ", put.layout.device.device_type, ", id ", put.layout.device.device_id,
        "} is not available: this server holds host (kDLCPU 0) and CUDA (kDLCUDA) tensors"));
  }
  TENSORD_ASSIGN_OR_RETURN(uint64_t required, dlpack::RequiredBytes(put.layout));
  if (total_bytes != required) {
    return absl::InvalidArgumentError(
        absl::StrCat("total_bytes ", total_bytes, " does not match the ", required,
                     " bytes the layout ", dlpack::DescribeLayout(put.layout), " needs"));
  }
  if (required > max_tensor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("tensor '", put.name, "' is ", required,
                                                     " bytes; the limit (--max-tensor-bytes) is ",
                                                     max_tensor_bytes));
  }
  put.total_bytes = required;
  return put;
}

namespace {

// `has_range`, `offset` and `length` as FetchRequest.range has them.
absl::StatusOr<ByteSpan> ResolveRange(absl::string_view name, bool has_range, uint64_t offset,
                                      uint64_t length, uint64_t total_bytes) {
  if (!has_range) return ByteSpan{0, total_bytes};
  if (offset > total_bytes) {
    return absl::OutOfRangeError(absl::StrCat("range.offset ", offset, " is beyond the ",
                                              total_bytes, " bytes of tensor '", name, "'"));
  }
  if (length == 0) length = total_bytes - offset;
  if (length > total_bytes - offset) {
    return absl::OutOfRangeError(absl::StrCat("range [", offset, ", +", length,
                                              ") reaches beyond the ", total_bytes,
                                              " bytes of tensor '", name, "'"));
  }
  return ByteSpan{offset, length};
}

}  // namespace

absl::StatusOr<ByteSpan> ResolveFetchRange(const v1::FetchRequest& request, uint64_t total_bytes) {
  return ResolveRange(request.name(), request.has_range(), request.range().offset(),
                      request.range().length(), total_bytes);
}

absl::StatusOr<ByteSpan> ResolveFetchRange(const WireFetchRequest& request, uint64_t total_bytes) {
  return ResolveRange(request.name, request.has_range, request.range_offset, request.range_length,
                      total_bytes);
}

absl::Status ValidateBatchSelection(absl::string_view what, size_t items, size_t max_items,
                                    const std::optional<std::string>& prefix,
                                    uint64_t group_version, std::optional<uint64_t> cluster_group) {
  const uint64_t cluster = cluster_group.value_or(0);
  const int selectors = (items > 0 ? 1 : 0) + (prefix.has_value() ? 1 : 0) +
                        (group_version != 0 ? 1 : 0) + (cluster != 0 ? 1 : 0);
  if (selectors != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " names ", items, " items",
        prefix.has_value() ? absl::StrCat(", prefix '", absl::CHexEscape(*prefix), "'") : "",
        group_version != 0 ? absl::StrCat(", group ", group_version) : "",
        cluster != 0 ? absl::StrCat(", cluster group ", cluster) : "",
        cluster_group.has_value()
            ? ": give exactly one of items, prefix, group_version and cluster_group"
            : ": give exactly one of items, prefix and group_version"));
  }
  if (cluster > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of cluster group ", cluster, ": an etcd revision is at most 2^63-1"));
  }
  if (items > max_items) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of ", items, " items; at most ", max_items, " per request"));
  }
  return absl::OkStatus();
}

}  // namespace tensord
