// glibc malloc settings for processes that stream large transfers over gRPC.
#ifndef TENSORD_SERVICE_COMMON_MALLOC_TUNING_H_
#define TENSORD_SERVICE_COMMON_MALLOC_TUNING_H_

#include <cstddef>

namespace tensord {

// Free heap memory glibc keeps (per arena) instead of handing it back to
// the kernel.
inline constexpr size_t kKeptFreeHeapBytes = size_t{64} << 20;
// Blocks up to this size come from the heap, not from an mmap of their
// own: where glibc's dynamic threshold ends up anyway in a process that
// frees large blocks (setting the trim threshold stops that adjustment,
// which would otherwise leave it at 128 KiB and map every larger block).
inline constexpr size_t kHeapBlockLimitBytes = size_t{32} << 20;

// gRPC receives into buffers from malloc and frees them once a message is
// consumed. With glibc's default trim threshold (128 KiB, raised only after
// a large mmap'd block happens to be freed) the freed top of the heap goes
// back to the kernel, and the next transfer faults it in again: about
// 30,000 page faults (120 MiB) per 256 MiB fetch, and 40% of a warm
// channel's throughput. Keeping up to kKeptFreeHeapBytes free per arena
// ends that (the cost: up to that much more resident memory per arena).
// Process-wide and idempotent; glibc only (a no-op elsewhere).
void KeepFreedHeapForTransfers();

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_MALLOC_TUNING_H_
