#include "bench/rss_sampler.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tensord::bench {

absl::StatusOr<ResidentMemory> ReadResidentMemory(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  ResidentMemory memory;
  int found = 0;
  std::string line;
  while (std::getline(in, line)) {
    // "VmRSS:\t  123456 kB"
    std::pair<std::string, std::string> field = absl::StrSplit(line, absl::MaxSplits(':', 1));
    uint64_t* target = nullptr;
    if (field.first == "VmRSS") target = &memory.vm_rss;
    if (field.first == "RssAnon") target = &memory.rss_anon;
    if (field.first == "RssFile") target = &memory.rss_file;
    if (field.first == "RssShmem") target = &memory.rss_shmem;
    if (target == nullptr) continue;
    absl::string_view value = absl::StripAsciiWhitespace(field.second);
    absl::ConsumeSuffix(&value, "kB");
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &kib)) {
      return absl::InternalError(absl::StrCat("unexpected line in ", path, ": ", line));
    }
    *target = kib * 1024;
    ++found;
  }
  if (found < 4) return absl::InternalError(absl::StrCat(path, " lacks VmRSS/RssAnon/RssFile/RssShmem"));
  return memory;
}

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
