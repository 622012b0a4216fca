// Wire TensorInfo -> the client's public TensorInfo, and checks against it.
#ifndef TENSORD_CLIENT_SRC_INFO_CONVERSION_H_
#define TENSORD_CLIENT_SRC_INFO_CONVERSION_H_

#include "absl/status/statusor.h"
#include "service/dlpack/tensor_layout.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/tensor.h"
#include "tensord/v1/tensor.pb.h"

namespace tensord {

// Validates what the server sent (a client trusts no peer blindly): the
// layout must be well formed and fit total_bytes.
absl::StatusOr<TensorInfo> InfoFromProto(const v1::TensorInfo& proto);
// The same from fields parsed by hand (Stat answers and fetch headers).
absl::StatusOr<TensorInfo> InfoFromWire(WireTensorInfo wire);
// The same into `info` (a default one), moving `wire`'s strings and
// vectors: no TensorInfo is moved whole, as a batch's thousand are not.
absl::Status InfoFromWire(WireTensorInfo& wire, TensorInfo& info);
// The fields of `proto`, as ParseWire* would give them.
WireTensorInfo WireInfoOf(const v1::TensorInfo& proto);

dlpack::TensorLayout LayoutOfInfo(const TensorInfo& info);

// FetchInto's rule: the caller's `destination` must have the stored dtype
// and shape (any strides); INVALID_ARGUMENT describing both otherwise.
absl::Status CheckDestinationMatches(const dlpack::TensorLayout& destination,
                                     const TensorInfo& info);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_INFO_CONVERSION_H_
