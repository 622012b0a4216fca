#include "bench/measure.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/proc_stats.h"
#include "service/common/mutex.h"

namespace tensord::bench {
namespace {

constexpr uint64_t kPageBytes = 4096;

uint64_t PatternWord(uint64_t index, uint64_t seed) {
  // Cheap and position-dependent: a misplaced chunk shows up as wrong bytes.
  return (index + 1) * 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull);
}

}  // namespace

double Median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

double Percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  rank = std::clamp<size_t>(rank, 1, samples.size());
  return samples[rank - 1];
}

absl::StatusOr<std::vector<std::vector<double>>> RepeatInterleaved(
    const RepeatPolicy& policy, const std::vector<TimedRun>& cases) {
  for (int i = 0; i < policy.warmup; ++i) {
    for (const TimedRun& run : cases) {
      if (absl::StatusOr<double> seconds = run(); !seconds.ok()) return seconds.status();
    }
  }
  std::vector<std::vector<double>> samples(cases.size());
  const double budget = policy.budget_s * static_cast<double>(cases.size());
  double spent = 0;
  for (int round = 0; round < policy.max_runs && (round < policy.min_runs || spent < budget);
       ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      absl::StatusOr<double> seconds = cases[i]();
      if (!seconds.ok()) return seconds.status();
      samples[i].push_back(*seconds);
      spent += *seconds;
    }
  }
  return samples;
}

absl::StatusOr<std::vector<double>> Repeat(const RepeatPolicy& policy, const TimedRun& run) {
  absl::StatusOr<std::vector<std::vector<double>>> samples = RepeatInterleaved(policy, {run});
  if (!samples.ok()) return samples.status();
  return std::move(samples->front());
}

absl::StatusOr<LoadSamples> RunLoad(int threads, double warmup_s, double duration_s,
                                    const std::function<absl::StatusOr<Operation>(int)>& make,
                                    const std::vector<pid_t>& cpu_pids) {
  auto cpu_now = [&]() -> absl::StatusOr<double> {
    double total = 0;
    for (pid_t pid : cpu_pids) {
      absl::StatusOr<double> seconds = ReadCpuSeconds(pid);
      if (!seconds.ok()) return seconds.status();
      total += *seconds;
    }
    return total;
  };
  Mutex mutex;
  CondVar changed;
  int ready = 0;
  bool go = false;
  absl::Status failure;
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> latencies(threads);
  // When each thread's last timed call ended: tearing its operation down
  // (closing a channel) is not part of the load.
  std::vector<Clock::time_point> finished(threads);

  // Records the first failure and releases everyone.
  auto fail = [&](const absl::Status& status) {
    MutexLock lock(&mutex);
    if (failure.ok()) failure = status;
    stop = true;
    go = true;
    changed.SignalAll();
  };
  auto body = [&](int index) {
    absl::StatusOr<Operation> op = make(index);
    absl::Status status = op.status();
    const Clock::time_point warm_until =
        Clock::now() +
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup_s));
    while (status.ok()) {
      status = (*op)();
      if (Clock::now() >= warm_until) break;
    }
    {
      MutexLock lock(&mutex);
      ++ready;
      changed.SignalAll();
      while (status.ok() && !go) changed.Wait(&mutex);
    }
    if (!status.ok()) return fail(status);
    std::vector<double>& mine = latencies[index];
    mine.reserve(1 << 16);
    while (!stop.load(std::memory_order_relaxed)) {
      const Clock::time_point start = Clock::now();
      if (status = (*op)(); !status.ok()) return fail(status);
      const Clock::time_point end = Clock::now();
      mine.push_back(std::chrono::duration<double, std::micro>(end - start).count());
      finished[index] = end;
    }
  };

  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (int i = 0; i < threads; ++i) workers.emplace_back(body, i);
  Clock::time_point start;
  absl::StatusOr<double> cpu_start = 0.0;
  {
    MutexLock lock(&mutex);
    while (ready != threads) changed.Wait(&mutex);
    cpu_start = cpu_now();
    go = true;
    start = Clock::now();
    changed.SignalAll();
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(duration_s));
  stop = true;
  // Before the workers tear their clients down; the calls still in flight
  // (at most one per thread) add a little.
  absl::StatusOr<double> cpu_end = cpu_now();
  for (std::thread& worker : workers) worker.join();
  if (!failure.ok()) return failure;
  if (!cpu_start.ok()) return cpu_start.status();
  if (!cpu_end.ok()) return cpu_end.status();
  const Clock::time_point end = *std::max_element(finished.begin(), finished.end());
  const double elapsed = std::chrono::duration<double>(end - start).count();

  LoadSamples samples;
  samples.elapsed_s = elapsed;
  samples.cpu_s = *cpu_end - *cpu_start;
  for (const std::vector<double>& mine : latencies) {
    samples.latencies_us.insert(samples.latencies_us.end(), mine.begin(), mine.end());
  }
  if (samples.latencies_us.empty()) return absl::InternalError("load run completed no operation");
  return samples;
}

LoadResult Summarize(const std::vector<LoadSamples>& runs) {
  std::vector<double> all;
  double elapsed = 0;
  double cpu = 0;
  for (const LoadSamples& run : runs) {
    all.insert(all.end(), run.latencies_us.begin(), run.latencies_us.end());
    elapsed += run.elapsed_s;
    cpu += run.cpu_s;
  }
  LoadResult result;
  if (all.empty() || elapsed <= 0) return result;
  result.ops = all.size();
  result.ops_per_second = static_cast<double>(all.size()) / elapsed;
  result.p50_us = Percentile(all, 50);
  result.p99_us = Percentile(all, 99);
  result.cpu_us_per_op = cpu * 1e6 / static_cast<double>(all.size());
  return result;
}

double RunRate(const LoadSamples& run) {
  return run.elapsed_s > 0 ? static_cast<double>(run.latencies_us.size()) / run.elapsed_s : 0;
}

double RunCpuPerCall(const LoadSamples& run) {
  return run.latencies_us.empty() ? 0
                                  : run.cpu_s * 1e6 / static_cast<double>(run.latencies_us.size());
}

double MedianSliceRatio(const std::vector<LoadSamples>& runs,
                        const std::vector<LoadSamples>& baseline,
                        double (*metric)(const LoadSamples&)) {
  if (runs.empty() || runs.size() != baseline.size()) return 0;
  std::vector<double> ratios;
  for (size_t i = 0; i < runs.size(); ++i) {
    const double base = metric(baseline[i]);
    if (base > 0) ratios.push_back(metric(runs[i]) / base);
  }
  if (ratios.empty()) return 0;
  std::sort(ratios.begin(), ratios.end());
  const size_t middle = ratios.size() / 2;
  return ratios.size() % 2 == 1 ? ratios[middle] : (ratios[middle - 1] + ratios[middle]) / 2;
}

absl::StatusOr<Buffer> Buffer::Allocate(uint64_t bytes) {
  Buffer buffer;
  buffer.size_ = bytes;
  buffer.mapped_ =
      std::max<uint64_t>(kPageBytes, (bytes + kPageBytes - 1) / kPageBytes * kPageBytes);
  void* data =
      ::mmap(nullptr, buffer.mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) {
    buffer.mapped_ = 0;
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of ", bytes, " bytes: ", std::strerror(errno)));
  }
  buffer.data_ = static_cast<uint8_t*>(data);
  std::memset(buffer.data_, 0, buffer.mapped_);  // pre-fault
  return buffer;
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (mapped_ > 0) ::munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

Buffer::~Buffer() {
  if (mapped_ > 0) ::munmap(data_, mapped_);
}

void FillPattern(void* data, uint64_t bytes, uint64_t seed) {
  uint8_t* out = static_cast<uint8_t*>(data);
  const uint64_t words = bytes / 8;
  for (uint64_t i = 0; i < words; ++i) {
    const uint64_t word = PatternWord(i, seed);
    std::memcpy(out + i * 8, &word, 8);
  }
  for (uint64_t offset = words * 8; offset < bytes; ++offset)
    out[offset] = PatternByte(offset, seed);
}

uint8_t PatternByte(uint64_t offset, uint64_t seed) {
  return static_cast<uint8_t>(PatternWord(offset / 8, seed) >> (8 * (offset % 8)));
}

std::vector<uint64_t> SpotOffsets(uint64_t bytes) {
  std::vector<uint64_t> offsets;
  if (bytes == 0) return offsets;
  for (uint64_t i = 0; i < std::min<uint64_t>(bytes, 16); ++i) {
    offsets.push_back(i);
    offsets.push_back(bytes - 1 - i);
  }
  constexpr uint64_t kSpots = 64;
  const uint64_t stride = std::max<uint64_t>(1, bytes / kSpots);
  for (uint64_t i = 0; i < kSpots; ++i) {
    // Odd offsets inside each 64th, so chunk boundaries are not all we see.
    offsets.push_back(std::min(bytes - 1, stride * i + (i * 131 + 7) % stride));
  }
  return offsets;
}

PatternSpots::PatternSpots(uint64_t bytes, uint64_t seed) : bytes_(bytes) {
  for (uint64_t offset : SpotOffsets(bytes)) spots_.emplace_back(offset, PatternByte(offset, seed));
}

absl::Status PatternSpots::Check(const void* data, absl::string_view what) const {
  const uint8_t* in = static_cast<const uint8_t*>(data);
  for (const auto& [offset, expected] : spots_) {
    if (in[offset] != expected) {
      return absl::DataLossError(absl::StrCat(what, ": byte ", offset, " of ", bytes_, " is ",
                                              in[offset], ", expected ", expected));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPattern(const void* data, uint64_t bytes, uint64_t seed, absl::string_view what) {
  return PatternSpots(bytes, seed).Check(data, what);
}

void ScribbleSpots(void* data, uint64_t bytes, uint64_t seed) {
  uint8_t* out = static_cast<uint8_t*>(data);
  for (uint64_t offset : SpotOffsets(bytes))
    out[offset] = static_cast<uint8_t>(~PatternByte(offset, seed));
}

uint64_t TouchEveryPage(const void* data, uint64_t bytes) {
  const volatile uint8_t* in = static_cast<const volatile uint8_t*>(data);
  uint64_t sum = 0;
  for (uint64_t offset = 0; offset < bytes; offset += kPageBytes) sum += in[offset];
  return sum;
}

}  // namespace tensord::bench
