#include "bench/proc_stats.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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
  if (found < 4)
    return absl::InternalError(absl::StrCat(path, " lacks VmRSS/RssAnon/RssFile/RssShmem"));
  return memory;
}

absl::StatusOr<double> ReadCpuSeconds(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string text = contents.str();
  // "PID (comm) S ppid ...": comm may hold spaces, so split after its ')'.
  const size_t close = text.rfind(')');
  if (!in || close == std::string::npos)
    return absl::UnavailableError(absl::StrCat("cannot read ", path));
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(text).substr(close + 2), ' ', absl::SkipEmpty());
  // Fields 14 and 15 of the file (utime, stime) are 11 and 12 after "S".
  uint64_t user = 0, system = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &user) ||
      !absl::SimpleAtoi(fields[12], &system)) {
    return absl::InternalError(absl::StrCat("unexpected contents of ", path));
  }
  return static_cast<double>(user + system) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

absl::StatusOr<ThreadCpuNanos> ReadThreadCpuNanos(pid_t pid) {
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  // The error_code forms throughout: a process that exits meanwhile is an
  // error to return, not an exception.
  std::error_code error;
  ThreadCpuNanos threads;
  for (std::filesystem::directory_iterator thread(tasks, error), end; !error && thread != end;
       thread.increment(error)) {
    pid_t tid = 0;
    if (!absl::SimpleAtoi(thread->path().filename().string(), &tid)) continue;
    // "<ns on a CPU> <ns waiting for one> <timeslices>"
    std::ifstream in(thread->path() / "schedstat");
    uint64_t on_cpu = 0;
    if (!(in >> on_cpu)) continue;  // the thread exited meanwhile
    threads[tid] = on_cpu;
  }
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot list ", tasks, ": ", error.message()));
  }
  if (threads.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "no thread under ", tasks, " has a readable schedstat (a kernel without schedstats?)"));
  }
  return threads;
}

uint64_t CpuNanosBetween(const ThreadCpuNanos& before, const ThreadCpuNanos& after) {
  uint64_t total = 0;
  for (const auto& [tid, now] : after) {
    auto earlier = before.find(tid);
    const uint64_t then = earlier == before.end() ? 0 : earlier->second;
    total += now - std::min(now, then);
  }
  return total;
}

}  // namespace tensord::bench
