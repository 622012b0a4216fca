// Checks of every request field before a byte moves. Plain functions over the
// wire messages so fuzz targets and unit tests reach them without a server.
#ifndef TENSORD_SERVICE_TRANSPORT_REQUEST_VALIDATION_H_
#define TENSORD_SERVICE_TRANSPORT_REQUEST_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/dlpack/tensor_layout.h"
#include "service/registry/tensor_version.h"
#include "service/wire/wire_requests.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {

struct WireLayout;     // service/wire/wire_tensor_info.h
struct WirePutHeader;  // service/wire/batch_put_items.h

// Most part streams one put may be split into (PutPart.parts).
inline constexpr uint32_t kMaxPutParts = 16;

// One part of a put carried by several streams (PutHeader.part).
struct ValidatedPutPart {
  std::string upload_id;
  uint32_t parts = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct ValidatedPut {
  std::string name;
  dlpack::TensorLayout layout;
  uint64_t total_bytes = 0;
  std::optional<uint32_t> crc32c;
  Retention retention = Retention::kDefault;
  // Set for a part of a put carried by several streams.
  std::optional<ValidatedPutPart> part;
};

// Name rules, layout (dtype, ndim, shape, strides, byte_offset), a host or
// CUDA device (kDLCUDAHost becomes kDLCPU), total_bytes equal to what the layout needs and at most
// `max_tensor_bytes`. INVALID_ARGUMENT names the field and value; a tensor
// over the size limit is RESOURCE_EXHAUSTED; a device this server cannot hold
// is FAILED_PRECONDITION.
absl::StatusOr<Retention> RetentionFromProto(int retention);

absl::StatusOr<ValidatedPut> ValidatePutHeader(const v1::PutHeader& header,
                                               uint64_t max_tensor_bytes);
// The same for a header parsed by hand (a BatchPut item's); its layout is
// moved from.
absl::StatusOr<ValidatedPut> ValidatePutHeader(WirePutHeader& header, uint64_t max_tensor_bytes);
// The same rules for a write described without a PutHeader (a handoff
// create or put_many item: no checksum, no part), with no header built.
absl::StatusOr<ValidatedPut> ValidatePutFields(const std::string& name,
                                               const v1::TensorLayout& layout, uint64_t total_bytes,
                                               int retention, uint64_t max_tensor_bytes);
// Both forms' one set of rules, on the layout's wire fields.
absl::StatusOr<ValidatedPut> ValidatePutFields(absl::string_view name, WireLayout layout,
                                               uint64_t total_bytes, int retention,
                                               uint64_t max_tensor_bytes);

// A batch read chooses its tensors by exactly one of a name list (1..
// `max_items` names), a prefix, an atomic group's version, or a cluster
// group (`cluster_group`: nullopt for a request without that field);
// INVALID_ARGUMENT naming what was given otherwise. `what` names the
// request ("batch fetch", "batch acquire").
absl::Status ValidateBatchSelection(absl::string_view what, size_t items, size_t max_items,
                                    const std::optional<std::string>& prefix,
                                    uint64_t group_version,
                                    std::optional<uint64_t> cluster_group = std::nullopt);

// The absolute byte range [offset, offset + length) a fetch covers, checked
// against the tensor's size. OUT_OF_RANGE names the range and the size.
struct ByteSpan {
  uint64_t offset = 0;
  uint64_t length = 0;
};
absl::StatusOr<ByteSpan> ResolveFetchRange(const v1::FetchRequest& request, uint64_t total_bytes);
// The same for a request parsed by hand (FetchInline's).
absl::StatusOr<ByteSpan> ResolveFetchRange(const WireFetchRequest& request, uint64_t total_bytes);

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_REQUEST_VALIDATION_H_
