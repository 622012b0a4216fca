// Another process's resource use, read from /proc: resident memory by kind
// and CPU time.
#ifndef TENSORD_BENCH_PROC_STATS_H_
#define TENSORD_BENCH_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace tensord::bench {

// Bytes, from /proc/PID/status (VmRSS = RssAnon + RssFile + RssShmem).
struct ResidentMemory {
  uint64_t vm_rss = 0;
  uint64_t rss_anon = 0;
  uint64_t rss_file = 0;
  uint64_t rss_shmem = 0;
};

absl::StatusOr<ResidentMemory> ReadResidentMemory(pid_t pid);

// User + system CPU seconds of all of the process's threads so far, from
// /proc/PID/stat (clock-tick resolution, usually 10 ms).
absl::StatusOr<double> ReadCpuSeconds(pid_t pid);

// Nanoseconds that the process's live threads have run so far, summed from
// /proc/PID/task/*/schedstat: exact, where ReadCpuSeconds counts clock
// ticks (too coarse for calls of a few milliseconds), but without threads
// that already exited.
absl::StatusOr<uint64_t> ReadLiveThreadsCpuNanos(pid_t pid);

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_PROC_STATS_H_
