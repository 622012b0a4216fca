// What a process holds, read from /proc: resident anonymous and shared
// memory, open fds and mappings. The scale tests report memory per tensor
// or per name from two of these.
#ifndef TENSORD_TESTS_INTEGRATION_PROCESS_MEMORY_H_
#define TENSORD_TESTS_INTEGRATION_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstdint>

namespace tensord::testing {

struct ProcessMemory {
  uint64_t anon_kib = 0;   // heap, stacks: the process's own memory
  uint64_t shmem_kib = 0;  // shared pages it has touched (tensor arenas)
  uint64_t fds = 0;
  uint64_t mappings = 0;
};

ProcessMemory MemoryOf(pid_t pid);

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_PROCESS_MEMORY_H_
