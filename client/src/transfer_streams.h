// How many concurrent streams a large remote transfer is split into, and
// the byte ranges they carry.
#ifndef TENSORD_CLIENT_SRC_TRANSFER_STREAMS_H_
#define TENSORD_CLIENT_SRC_TRANSFER_STREAMS_H_

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/client.h"

namespace tensord {

inline constexpr uint32_t kMaxTransferStreams = kMaxFetchStreams;
// A part smaller than this is not worth a stream (and a connection) of its own.
inline constexpr uint64_t kMinStreamPartBytes = uint64_t{16} << 20;
// Automatic choice: one stream per this many bytes...
inline constexpr uint64_t kAutoBytesPerStream = uint64_t{64} << 20;
// ...up to this many: for a fetch, one per 2 cores (a stream's receive and
// copy keep a core of this client busy; on 2 cores one stream is as fast as
// several, measured); for a put, on any host of 2 cores or more (the client
// only sends; the server's parts also wait on new pages, so more parts than
// cores keep it busy: on 2 cores a 1 GiB put in 4 streams ran at 0.62-0.77x
// raw TCP against 0.43-0.53x in 2 and 0.31-0.33x in 1, three runs each, and
// 256 MiB was level at 0.67-0.70x in 1, 2 or 4).
inline constexpr uint32_t kMaxAutoTransferStreams = 4;

enum class TransferDirection { kFetch, kPut };

struct TransferPart {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// The host's cores, read once: std::thread::hardware_concurrency() reads
// /sys on every call (1.7 us here, measured), too much for a 4 KiB fetch.
unsigned HostCores();

// INVALID_ARGUMENT naming the value when `requested` is above kMaxTransferStreams.
absl::Status ValidateTransferStreams(uint32_t requested);

// The size above which a transfer is split, for `requested` streams (0:
// automatic) on a host of `cores`; 0 when it is never split.
uint64_t SplitAboveBytes(TransferDirection direction, uint32_t requested, unsigned cores);

// The streams for `bytes` once it is known to be split: `requested`, or
// the automatic choice; never more than one per kMinStreamPartBytes.
uint32_t TransferStreamsFor(TransferDirection direction, uint64_t bytes, uint32_t requested,
                            unsigned cores);

// [offset, offset + length) in `parts` contiguous ranges, every one but the
// last a multiple of 1 MiB.
std::vector<TransferPart> SplitIntoParts(uint64_t offset, uint64_t length, uint32_t parts);

// What a transfer in parts (`what`, e.g. "the put of 'x'") ends with, from
// its parts' `outcomes`: OK when all are; else the first failure that is
// not an echo of another part's (`echoes`: the CANCELLED of our own ending
// of the other parts, and for a put the server's ABORTED of them). When
// every failure is an echo and `deadline_passed`, DEADLINE_EXCEEDED: a
// part's deadline can reach the server first, which then ends the other
// parts, whose answers (or our cancellation) reach the client before its
// own deadline timers fire.
absl::Status CauseOfFailedParts(std::span<const absl::Status> outcomes,
                                std::initializer_list<absl::StatusCode> echoes,
                                bool deadline_passed, absl::string_view what);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_TRANSFER_STREAMS_H_
