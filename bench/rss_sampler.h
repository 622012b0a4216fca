// Samples another process's resident memory (/proc/PID/status) from a
// thread of its own, keeping the peak of each figure.
#ifndef TENSORD_BENCH_RSS_SAMPLER_H_
#define TENSORD_BENCH_RSS_SAMPLER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/status/statusor.h"
#include "bench/proc_stats.h"

namespace tensord::bench {

// Samples every `interval_us` between construction and Stop(); each field of
// the result is that field's own peak.
class RssSampler {
 public:
  RssSampler(pid_t pid, int interval_us);
  ~RssSampler();
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

  // Stops sampling (taking one last sample) and returns the peaks and how
  // many samples were taken; an error if /proc could not be read.
  absl::StatusOr<ResidentMemory> Stop(int* samples = nullptr);

 private:
  void Run();

  const pid_t pid_;
  const int interval_us_;
  std::atomic<bool> stop_{false};
  ResidentMemory peak_;
  absl::Status error_;
  int samples_ = 0;
  std::thread thread_;
};

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_RSS_SAMPLER_H_
