// Wire TensorInfo -> the client's public TensorInfo, and checks against it.
#ifndef TENSORD_CLIENT_SRC_INFO_CONVERSION_H_
#define TENSORD_CLIENT_SRC_INFO_CONVERSION_H_

#include <cstdint>
#include <string>

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
// The info of a version this client put, from what it sent (a compact
// layout it checked itself) and the server's number, CRC and time: built
// directly, not through a TensorInfo message and its checks, as a batch
// put's thousand results are.
TensorInfo InfoOfPut(std::string name, const dlpack::TensorLayout& compact, uint64_t total_bytes,
                     int32_t wire_retention, uint64_t version, uint32_t crc32c,
                     int64_t created_unix_nanos);
// The fields of `proto`, as ParseWire* would give them.
WireTensorInfo WireInfoOf(const v1::TensorInfo& proto);

dlpack::TensorLayout LayoutOfInfo(const TensorInfo& info);

// FetchInto's rule: the caller's `destination` must have the stored dtype
// and shape (any strides); INVALID_ARGUMENT describing both otherwise.
absl::Status CheckDestinationMatches(const dlpack::TensorLayout& destination,
                                     const TensorInfo& info);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_INFO_CONVERSION_H_
