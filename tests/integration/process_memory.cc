#include "tests/integration/process_memory.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {

ProcessMemory MemoryOf(pid_t pid) {
  ProcessMemory memory;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    std::vector<std::string> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (parts.size() < 2) continue;
    if (parts[0] == "RssAnon:") (void)absl::SimpleAtoi(parts[1], &memory.anon_kib);
    if (parts[0] == "RssShmem:") (void)absl::SimpleAtoi(parts[1], &memory.shmem_kib);
  }
  memory.fds = CountOpenFds(absl::StrCat("/proc/", pid, "/fd"));
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  for (std::string line; std::getline(maps, line);) ++memory.mappings;
  return memory;
}

}  // namespace tensord::testing
