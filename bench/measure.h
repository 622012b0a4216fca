// Timing and data helpers shared by every benchmark section: repeated and
// time-bounded measurements, percentiles, pre-faulted buffers, and a byte
// pattern that lets a section spot-check what it received.
#ifndef TENSORD_BENCH_MEASURE_H_
#define TENSORD_BENCH_MEASURE_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median of `samples` (not empty).
double Median(std::vector<double> samples);
// The p-th percentile (0..100) by nearest rank, of `samples` (not empty).
double Percentile(std::vector<double> samples, double p);

inline double GigabytesPerSecond(uint64_t bytes, double seconds) {
  return static_cast<double>(bytes) / seconds / 1e9;
}

// How often to repeat one measurement: `warmup` untimed runs, then at least
// `min_runs` and at most `max_runs` timed ones, stopping once `budget_s`
// seconds of timed runs have passed.
struct RepeatPolicy {
  int warmup = 1;
  int min_runs = 3;
  int max_runs = 9;
  double budget_s = 1.0;
};

// One timed case: returns the seconds of the part it timed itself (so it may
// do untimed setup and teardown), or an error for a functional failure.
using TimedRun = std::function<absl::StatusOr<double>()>;

// Runs every case as `policy` says, in rounds: each round runs each case
// once, so a change in the machine's load hits all of them alike (the
// machine is shared). The budget applies per case. Per-case samples, in
// seconds; the first error stops everything.
absl::StatusOr<std::vector<std::vector<double>>> RepeatInterleaved(
    const RepeatPolicy& policy, const std::vector<TimedRun>& cases);

// RepeatInterleaved with one case.
absl::StatusOr<std::vector<double>> Repeat(const RepeatPolicy& policy, const TimedRun& run);

// Throughput and latency of one operation run by several threads at once.
struct LoadResult {
  double ops_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  uint64_t ops = 0;
  // CPU time of the measured processes per call; 0 when none were given.
  double cpu_us_per_op = 0;
};

// What one timed load run recorded.
struct LoadSamples {
  std::vector<double> latencies_us;
  double elapsed_s = 0;
  double cpu_s = 0;  // of the processes in `cpu_pids`, over the timed part
};

// One thread's operation; returns an error only for a functional failure.
using Operation = std::function<absl::Status()>;

// Starts `threads` threads; thread i builds its operation with `make(i)`
// (e.g. a Client of its own), runs it for `warmup_s`, then all threads run
// it together for `duration_s` while every call's latency is recorded, and
// the CPU time the processes `cpu_pids` spend meanwhile (client and server:
// unlike rates, little disturbed by other work on a shared machine).
absl::StatusOr<LoadSamples> RunLoad(int threads, double warmup_s, double duration_s,
                                    const std::function<absl::StatusOr<Operation>(int)>& make,
                                    const std::vector<pid_t>& cpu_pids = {});

// Rate over the summed elapsed time, percentiles over all calls, of several
// runs of the same load (e.g. slices interleaved with other loads).
LoadResult Summarize(const std::vector<LoadSamples>& runs);

// Calls per second, and CPU microseconds per call, of one run.
double RunRate(const LoadSamples& run);
double RunCpuPerCall(const LoadSamples& run);

// The median over i of metric(runs[i]) / metric(baseline[i]), where run i
// and baseline i were slices run back to back: a change in the shared
// machine's load between slices then cancels, which a ratio of pooled
// totals does not do. 0 when the lists differ in length or are empty.
double MedianSliceRatio(const std::vector<LoadSamples>& runs,
                        const std::vector<LoadSamples>& baseline,
                        double (*metric)(const LoadSamples&));

// Page-aligned anonymous memory, written once at allocation so later
// measurements do not pay its page faults.
class Buffer {
 public:
  static absl::StatusOr<Buffer> Allocate(uint64_t bytes);
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer();
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;
};

// Writes a position-dependent pattern that differs per `seed`.
void FillPattern(void* data, uint64_t bytes, uint64_t seed);
// Checks the pattern at both ends and ~64 offsets spread over the buffer
// (touching only a few pages); DATA_LOSS naming the first wrong byte.
absl::Status CheckPattern(const void* data, uint64_t bytes, uint64_t seed, absl::string_view what);
// Writes wrong bytes where CheckPattern looks, so a check after a transfer
// into reused memory cannot pass on what an earlier transfer left there.
void ScribbleSpots(void* data, uint64_t bytes, uint64_t seed);
// The offsets CheckPattern and ScribbleSpots use.
std::vector<uint64_t> SpotOffsets(uint64_t bytes);

// CheckPattern with the offsets and their pattern bytes worked out once, for
// loops of small fetches: worked out per call they cost ~6,000 instructions,
// as much as a fifth of the client's own part of a 4 KiB fetch.
class PatternSpots {
 public:
  PatternSpots(uint64_t bytes, uint64_t seed);
  // DATA_LOSS naming the first wrong byte of the `bytes` at `data`.
  absl::Status Check(const void* data, absl::string_view what) const;

 private:
  uint64_t bytes_;
  std::vector<std::pair<uint64_t, uint8_t>> spots_;  // offset, expected byte
};
// The pattern byte FillPattern writes at `offset`.
uint8_t PatternByte(uint64_t offset, uint64_t seed);

// Reads one byte of every 4 KiB page, so every page is faulted in once;
// returns their sum so the reads cannot be optimised away.
uint64_t TouchEveryPage(const void* data, uint64_t bytes);

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_MEASURE_H_
