// A fixed-bucket latency histogram recorded with relaxed atomics only, so
// the call path never takes a lock; a scrape reads it while calls record.
#ifndef TENSORD_SERVICE_METRICS_LATENCY_HISTOGRAM_H_
#define TENSORD_SERVICE_METRICS_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace tensord {

// Upper bounds (inclusive, seconds) of the buckets, from a small unary call
// on loopback (~100 µs) to a multi-GiB stream; the last bucket is +Inf.
inline constexpr std::array<double, 18> kLatencyBucketBoundsSeconds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};

struct LatencySnapshot {
  // Non-cumulative: counts[i] observations fell in bucket i; the last entry
  // is the +Inf bucket.
  std::array<uint64_t, kLatencyBucketBoundsSeconds.size() + 1> counts{};
  double sum_seconds = 0;
  uint64_t count() const;
};

// Thread-safe.
class LatencyHistogram {
 public:
  void Observe(absl::Duration latency);
  // Bucket counts and sum read one by one: a snapshot taken while calls
  // record may miss the newest observation in the sum or a bucket, never
  // more than that.
  LatencySnapshot Snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, kLatencyBucketBoundsSeconds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_nanos_{0};
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_METRICS_LATENCY_HISTOGRAM_H_
