#include "service/metrics/latency_histogram.h"

#include <algorithm>

namespace tensord {

uint64_t LatencySnapshot::count() const {
  uint64_t total = 0;
  for (uint64_t bucket : counts) total += bucket;
  return total;
}

void LatencyHistogram::Observe(absl::Duration latency) {
  latency = std::max(latency, absl::ZeroDuration());
  const double seconds = absl::ToDoubleSeconds(latency);
  // Prometheus buckets are "less than or equal": the first bound >= seconds.
  const auto bound = std::lower_bound(kLatencyBucketBoundsSeconds.begin(),
                                      kLatencyBucketBoundsSeconds.end(), seconds);
  const size_t bucket = static_cast<size_t>(bound - kLatencyBucketBoundsSeconds.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(static_cast<uint64_t>(absl::ToInt64Nanoseconds(latency)),
                       std::memory_order_relaxed);
}

LatencySnapshot LatencyHistogram::Snapshot() const {
  LatencySnapshot snapshot;
  for (size_t i = 0; i < counts_.size(); ++i) {
    snapshot.counts[i] = counts_[i].load(std::memory_order_relaxed);
  }
  snapshot.sum_seconds = static_cast<double>(sum_nanos_.load(std::memory_order_relaxed)) / 1e9;
  return snapshot;
}

}  // namespace tensord
