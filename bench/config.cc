// How much each mode measures. The full run is budgeted to finish well
// under 3 minutes on a 2-core machine; the smoke run (CI) in ~10-20 s.
#include <algorithm>

#include "bench/cases.h"

namespace tensord::bench {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

RepeatPolicy FullTransferPolicy(uint64_t bytes) {
  if (bytes <= kMiB) return {.warmup = 20, .min_runs = 50, .max_runs = 5000, .budget_s = 0.4};
  if (bytes <= 64 * kMiB) return {.warmup = 1, .min_runs = 7, .max_runs = 21, .budget_s = 0.6};
  if (bytes <= 256 * kMiB) return {.warmup = 1, .min_runs = 5, .max_runs = 9, .budget_s = 1.0};
  // The channel is warm from the smaller sizes; a 1 GiB warm-up round would
  // cost ~10 s on a loaded 2-core machine.
  return {.warmup = 0, .min_runs = 3, .max_runs = 5, .budget_s = 1.0};
}

RepeatPolicy SmokeTransferPolicy(uint64_t bytes) {
  if (bytes <= kMiB) return {.warmup = 3, .min_runs = 10, .max_runs = 500, .budget_s = 0.05};
  return {.warmup = 1, .min_runs = 3, .max_runs = 5, .budget_s = 0.1};
}

// A round of 1024 runs 1024 single calls of each kind (~0.5 s on 2 cores):
// a few rounds are enough; a batch of 1 is a few hundred microseconds.
RepeatPolicy FullBatchPolicy(int count) {
  if (count <= 1) return {.warmup = 20, .min_runs = 50, .max_runs = 2000, .budget_s = 0.05};
  if (count <= 64) return {.warmup = 2, .min_runs = 10, .max_runs = 200, .budget_s = 0.1};
  return {.warmup = 1, .min_runs = 5, .max_runs = 21, .budget_s = 0.25};
}

RepeatPolicy SmokeBatchPolicy(int) {
  return {.warmup = 1, .min_runs = 3, .max_runs = 50, .budget_s = 0.01};
}

}  // namespace

uint64_t BenchConfig::LargestBytes() const {
  uint64_t largest = std::max(memcpy_bytes, memory_probe_bytes);
  for (uint64_t bytes : transfer_sizes) largest = std::max(largest, bytes);
  for (uint64_t bytes : local_sizes) largest = std::max(largest, bytes);
  for (uint64_t bytes : device_sizes) largest = std::max(largest, bytes);
  largest = std::max({largest, cluster_large_bytes, cluster_small_bytes});
  // The raw TCP baseline of a whole batch.
  for (uint64_t bytes : batch_tensor_sizes) {
    for (int count : batch_counts)
      largest = std::max(largest, bytes * static_cast<uint64_t>(count));
  }
  return std::max(largest, BatchMixedBytes());
}

uint64_t BenchConfig::BatchMixedBytes() const {
  uint64_t total = 0;
  for (int i = 0; i < batch_mixed_count && !batch_mixed_sizes.empty(); ++i) {
    total += batch_mixed_sizes[static_cast<size_t>(i) % batch_mixed_sizes.size()];
  }
  return total;
}

BenchConfig FullConfig() {
  BenchConfig config;
  config.mode = "full";
  config.memcpy_bytes = kGiB;
  config.transfer_sizes = {4 * kKiB, kMiB, 64 * kMiB, 256 * kMiB, kGiB};
  config.fresh_channel_bytes = 256 * kMiB;
  config.warm_channel_rounds = 5;
  config.memory_probe_bytes = kGiB;
  config.concurrency = {1, 4, 16};
  config.load_warmup_s = 0.1;
  // Short slices, many of them: the ratios are medians of slice pairs.
  config.load_duration_s = 2.8;
  config.load_slices = 7;
  config.local_sizes = {4 * kKiB, kMiB, 256 * kMiB, kGiB};
  config.device_sizes = {64 * kMiB, 256 * kMiB};
  config.batch_tensor_sizes = {4 * kKiB, 64 * kKiB};
  config.batch_counts = {1, 64, 1024};
  config.batch_distinct_names = 100'000;
  config.batch_mixed_sizes = {16 * kKiB, 32 * kKiB, 64 * kKiB, 128 * kKiB, 256 * kKiB};
  config.batch_mixed_count = 160;  // 15.5 MiB
  config.batch_scale_policy = {.warmup = 1, .min_runs = 3, .max_runs = 5, .budget_s = 4.0};
  config.transfer_policy = &FullTransferPolicy;
  config.latency_policy = {.warmup = 10, .min_runs = 200, .max_runs = 5000, .budget_s = 0.1};
  config.first_touch_policy = {.warmup = 1, .min_runs = 3, .max_runs = 9, .budget_s = 0.4};
  config.batch_policy = &FullBatchPolicy;
  config.cluster_large_bytes = 256 * kMiB;
  config.cluster_small_bytes = 4 * kKiB;
  config.cluster_large_policy = {.warmup = 1, .min_runs = 3, .max_runs = 5, .budget_s = 1.0};
  config.cluster_small_policy = {.warmup = 20, .min_runs = 50, .max_runs = 1000, .budget_s = 0.3};
  config.cluster_batch_count = 1000;
  config.cluster_batch_policy = {.warmup = 1, .min_runs = 5, .max_runs = 20, .budget_s = 2.0};
  config.cluster_failover_rounds = 3;
  config.cluster_join_names = 1'000'000;
  return config;
}

BenchConfig SmokeConfig() {
  BenchConfig config;
  config.mode = "smoke";
  config.memcpy_bytes = 16 * kMiB;
  config.transfer_sizes = {4 * kKiB, kMiB, 16 * kMiB};
  config.fresh_channel_bytes = 16 * kMiB;
  config.warm_channel_rounds = 1;
  config.memory_probe_bytes = 64 * kMiB;
  config.concurrency = {1, 4};
  config.load_warmup_s = 0.05;
  config.load_duration_s = 0.3;
  config.local_sizes = {4 * kKiB, kMiB, 16 * kMiB};
  config.device_sizes = {kMiB};
  config.batch_tensor_sizes = {4 * kKiB, 64 * kKiB};
  config.batch_counts = {1, 64};
  config.batch_distinct_names = 3'000;
  config.batch_mixed_sizes = {16 * kKiB, 256 * kKiB};
  config.batch_mixed_count = 4;
  config.batch_scale_policy = {.warmup = 0, .min_runs = 1, .max_runs = 1, .budget_s = 0.01};
  config.transfer_policy = &SmokeTransferPolicy;
  config.latency_policy = {.warmup = 3, .min_runs = 20, .max_runs = 500, .budget_s = 0.02};
  config.first_touch_policy = {.warmup = 1, .min_runs = 3, .max_runs = 3, .budget_s = 0.05};
  config.batch_policy = &SmokeBatchPolicy;
  config.cluster_large_bytes = kMiB;
  config.cluster_small_bytes = 4 * kKiB;
  config.cluster_large_policy = {.warmup = 1, .min_runs = 2, .max_runs = 2, .budget_s = 0.05};
  config.cluster_small_policy = {.warmup = 1, .min_runs = 5, .max_runs = 10, .budget_s = 0.01};
  config.cluster_batch_count = 100;
  config.cluster_batch_policy = {.warmup = 1, .min_runs = 2, .max_runs = 2, .budget_s = 0.05};
  config.cluster_failover_rounds = 1;
  config.cluster_join_names = 10'000;
  return config;
}

}  // namespace tensord::bench
