// The kernel limits that cap how many fds and mappings tensord may hold, read
// when an error needs to name them.
#ifndef TENSORD_SERVICE_COMMON_FD_LIMITS_H_
#define TENSORD_SERVICE_COMMON_FD_LIMITS_H_

#include <cstdint>

namespace tensord {

// RLIMIT_NOFILE's soft limit: the most fds this process may hold (0 when
// it cannot be read).
uint64_t OpenFileLimit();

// fs.file-max: the system-wide fd limit (0 when it cannot be read).
uint64_t SystemOpenFileLimit();

// vm.max_map_count: the most mappings one process may hold (0 when it
// cannot be read).
uint64_t MappingLimit();

// Fds this process holds now (entries of /proc/self/fd; 0 when unreadable).
uint64_t OpenFileCount();

// The connection caps derived from RLIMIT_NOFILE: half of the limit for
// gRPC connections, an eighth for handoff connections, leaving 3/8 for
// tensor versions (one memfd each), snapshot files, the server's own
// sockets and gRPC's internals.
uint64_t DefaultMaxConnections(uint64_t open_file_limit);
uint64_t DefaultMaxHandoffConnections(uint64_t open_file_limit);

// Tensor memory (the memfds of versions and arenas) may use only fds
// numbered below this ceiling; the fds above it are kept for connections,
// so tensors cannot starve them. 0 (the default) sets no ceiling.
// Process-wide, like the fd table it guards.
void SetTensorFdCeiling(uint64_t ceiling);
uint64_t TensorFdCeiling();
// The ceiling that keeps the connection caps' fds, but never more than 5/8
// of the limit (the caps' default share), so that caps set above the fd
// limit do not leave tensors nothing.
uint64_t TensorFdCeilingFor(uint64_t open_file_limit, uint64_t max_connections,
                            uint64_t max_handoff_connections);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_FD_LIMITS_H_
