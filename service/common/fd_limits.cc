#include "service/common/fd_limits.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <fstream>

#include "service/common/directory_entries.h"

namespace tensord {
namespace {

uint64_t ReadProcNumber(const char* path) {
  std::ifstream file(path);
  uint64_t value = 0;
  if (!(file >> value)) return 0;
  return value;
}

}  // namespace

uint64_t DefaultMaxConnections(uint64_t open_file_limit) {
  return std::max<uint64_t>(16, open_file_limit / 2);
}

uint64_t DefaultMaxHandoffConnections(uint64_t open_file_limit) {
  return std::max<uint64_t>(8, open_file_limit / 8);
}

uint64_t OpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit.rlim_cur);
}

uint64_t SystemOpenFileLimit() { return ReadProcNumber("/proc/sys/fs/file-max"); }

uint64_t MappingLimit() { return ReadProcNumber("/proc/sys/vm/max_map_count"); }

uint64_t OpenFileCount() {
  uint64_t count = 0;
  const absl::Status listed = ForEachDirectoryEntry("/proc/self/fd", [&](absl::string_view) {
    ++count;
    return true;
  });
  if (!listed.ok()) return 0;
  return count > 0 ? count - 1 : 0;  // not the directory's own fd
}

namespace {
std::atomic<uint64_t> tensor_fd_ceiling{0};
}  // namespace

void SetTensorFdCeiling(uint64_t ceiling) {
  tensor_fd_ceiling.store(ceiling, std::memory_order_relaxed);
}

uint64_t TensorFdCeiling() { return tensor_fd_ceiling.load(std::memory_order_relaxed); }

uint64_t TensorFdCeilingFor(uint64_t open_file_limit, uint64_t max_connections,
                            uint64_t max_handoff_connections) {
  if (open_file_limit == 0 || open_file_limit == UINT64_MAX) return 0;
  const uint64_t kept =
      std::min(max_connections + max_handoff_connections, open_file_limit / 8 * 5);
  return open_file_limit - kept;
}

}  // namespace tensord
