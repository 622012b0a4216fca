// Limits of the batch calls that client and server share.
#ifndef TENSORD_SERVICE_WIRE_BATCH_LIMITS_H_
#define TENSORD_SERVICE_WIRE_BATCH_LIMITS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "service/common/unix_socket.h"

namespace tensord {

// Most items in one BatchPut or BatchFetch: keeps the per-item results of a
// batch (about 30 bytes each) inside one gRPC message of the default size.
inline constexpr size_t kBatchItemLimit = 65536;

// Items up to this size travel whole inside item messages (many per
// message); larger ones as a header followed by chunks.
inline constexpr uint64_t kMaxInlineBatchItemBytes = 64 * 1024;

// Inline items of at least this size are referenced by the item message
// (a gRPC slice over their bytes, held until sent) instead of copied into
// it; a smaller item's copy costs less than a slice of its own (an
// allocation, a reference count, an iovec more to send).
inline constexpr uint64_t kMinReferencedBatchItemBytes = 16 * 1024;

// Most leases one handoff ReleaseRequest ends (at most 10 bytes each, so a
// full request stays far inside a handoff packet).
inline constexpr size_t kMaxLeasesPerRelease = 4096;

// How many lease ids a handoff request of `request_bytes` serialized bytes
// may carry in release_lease_ids and still fit one packet (the server
// closes the connection on a larger one, ending every lease it holds):
// at most 10 bytes an id (packed varints) after the field's tag and length.
inline size_t ReleaseIdsThatFit(size_t request_bytes) {
  constexpr size_t kFieldBytes = 1 + 3;
  constexpr size_t kMaxIdBytes = 10;
  if (request_bytes + kFieldBytes >= kMaxBatchPacketBytes) return 0;
  return std::min(kMaxLeasesPerRelease,
                  (kMaxBatchPacketBytes - request_bytes - kFieldBytes) / kMaxIdBytes);
}

// A local batch put (the handoff socket's put_many): the most items and
// item bytes one request carries, so its answer fits one packet and its
// copies hold the handoff loop for tens of milliseconds at most. A longer
// batch goes in several requests (an atomic one over gRPC).
inline constexpr size_t kMaxPutManyItems = 4096;
inline constexpr uint64_t kMaxPutManyBytes = uint64_t{256} << 20;

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_BATCH_LIMITS_H_
