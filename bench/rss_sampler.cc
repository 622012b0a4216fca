#include "bench/rss_sampler.h"

#include <algorithm>
#include <chrono>

namespace tensord::bench {

RssSampler::RssSampler(pid_t pid, int interval_us)
    : pid_(pid), interval_us_(interval_us), thread_(&RssSampler::Run, this) {}

RssSampler::~RssSampler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void RssSampler::Run() {
  while (true) {
    const bool last = stop_.load();
    absl::StatusOr<ResidentMemory> now = ReadResidentMemory(pid_);
    if (!now.ok()) {
      error_ = now.status();
      return;
    }
    ++samples_;
    peak_.vm_rss = std::max(peak_.vm_rss, now->vm_rss);
    peak_.rss_anon = std::max(peak_.rss_anon, now->rss_anon);
    peak_.rss_file = std::max(peak_.rss_file, now->rss_file);
    peak_.rss_shmem = std::max(peak_.rss_shmem, now->rss_shmem);
    if (last) return;
    std::this_thread::sleep_for(std::chrono::microseconds(interval_us_));
  }
}

absl::StatusOr<ResidentMemory> RssSampler::Stop(int* samples) {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (!error_.ok()) return error_;
  if (samples != nullptr) *samples = samples_;
  return peak_;
}

}  // namespace tensord::bench
