// Another process's resource use, read from /proc: resident memory by kind
// and CPU time.
#ifndef TENSORD_BENCH_PROC_STATS_H_
#define TENSORD_BENCH_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>

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

// Nanoseconds each live thread of the process has run so far, by thread
// id, from /proc/PID/task/*/schedstat: exact, where ReadCpuSeconds counts
// clock ticks (too coarse for calls of a few milliseconds). UNAVAILABLE
// when the process is gone or the kernel keeps no schedstat.
using ThreadCpuNanos = std::map<pid_t, uint64_t>;
absl::StatusOr<ThreadCpuNanos> ReadThreadCpuNanos(pid_t pid);

// What the threads ran between two readings: each one's growth, a thread
// born in between counted whole. A thread that exited in between is in
// neither sum (its last moments are lost), so exiting threads never make
// the total shrink.
uint64_t CpuNanosBetween(const ThreadCpuNanos& before, const ThreadCpuNanos& after);

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_PROC_STATS_H_
