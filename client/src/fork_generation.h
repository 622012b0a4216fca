// Forks in this process's line, so that an object made before a fork can
// tell it is in the child without a getpid() system call on every use.
#ifndef TENSORD_CLIENT_SRC_FORK_GENERATION_H_
#define TENSORD_CLIENT_SRC_FORK_GENERATION_H_

#include <cstdint>

namespace tensord {

// How many forks lie between the process that first called this and the
// calling process: 0 in that process, 1 in its child, and so on. Counted by
// a pthread_atfork handler registered on the first call, so call it once
// before any fork that matters (an object's constructor does).
uint64_t ForkGeneration();

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_FORK_GENERATION_H_
