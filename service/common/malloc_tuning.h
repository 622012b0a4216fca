// glibc malloc settings for processes that stream large transfers over gRPC.
#ifndef TENSORD_SERVICE_COMMON_MALLOC_TUNING_H_
#define TENSORD_SERVICE_COMMON_MALLOC_TUNING_H_

#include <cstddef>

namespace tensord {

// Free heap memory glibc keeps (per arena) instead of handing it back to
// the kernel.
inline constexpr size_t kKeptFreeHeapBytes = size_t{64} << 20;

// tensord::TuneMallocForTransfers (a program calls it once) calls it;
// tensord at start, pairing it with
// IdleHeapTrim so that an idle server hands the kept heap back (without
// that, its soak test's 10% private-memory bound caught the kept heap).
// gRPC receives into buffers from malloc and frees them once a message is
// consumed. With glibc's default trim threshold (128 KiB, raised only after
// a large mmap'd block happens to be freed) the freed top of the heap goes
// back to the kernel, and the next transfer faults it in again: about
// 30,000 page faults (120 MiB) per 256 MiB fetch, and 40% of a warm
// channel's throughput. Keeping up to kKeptFreeHeapBytes free per arena
// ends that (the cost: up to that much more resident memory per arena).
// Setting it also stops glibc's dynamic mmap threshold from rising above
// its 128 KiB start, so larger blocks keep their own mappings. Fixing that
// threshold at 32 MiB as well halved tensord's put throughput (measured),
// so it is left alone. Process-wide and idempotent; glibc only.
void KeepFreedHeapForTransfers();

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_MALLOC_TUNING_H_
