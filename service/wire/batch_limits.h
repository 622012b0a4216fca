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

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_BATCH_LIMITS_H_
