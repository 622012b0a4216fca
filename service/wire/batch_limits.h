// Limits of the batch calls that client and server share.
#ifndef TENSORD_SERVICE_WIRE_BATCH_LIMITS_H_
#define TENSORD_SERVICE_WIRE_BATCH_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace tensord {

// Most items in one BatchPut or BatchFetch: keeps the per-item results of a
// batch (about 30 bytes each) inside one gRPC message of the default size.
inline constexpr size_t kBatchItemLimit = 65536;

// Items up to this size travel whole inside item messages (many per
// message); larger ones as a header followed by chunks.
inline constexpr uint64_t kMaxInlineBatchItemBytes = 64 * 1024;

// Most leases one handoff ReleaseRequest ends (at most 10 bytes each, so a
// full request stays far inside a handoff packet).
inline constexpr size_t kMaxLeasesPerRelease = 4096;

// A local batch put (the handoff socket's put_many): the most items and
// item bytes one request carries, so its answer fits one packet and its
// copies hold the handoff loop for tens of milliseconds at most. A longer
// batch goes in several requests (an atomic one over gRPC).
inline constexpr size_t kMaxPutManyItems = 4096;
inline constexpr uint64_t kMaxPutManyBytes = uint64_t{256} << 20;

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_BATCH_LIMITS_H_
