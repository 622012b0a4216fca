// Seals a memfd so that one mapping of this process, made just before,
// is the only way left to change its bytes (F_SEAL_FUTURE_WRITE, Linux >=
// 5.1): what arenas and spare put memfds rely on to be written again
// while every fd handed out can only read.
#ifndef TENSORD_SERVICE_MEMORY_FUTURE_WRITE_SEAL_H_
#define TENSORD_SERVICE_MEMORY_FUTURE_WRITE_SEAL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

struct SealedMappings {
  uint8_t* writable = nullptr;
  const uint8_t* readable = nullptr;
};

// Maps the first `bytes` of `fd` writable, adds F_SEAL_FUTURE_WRITE|
// SHRINK|GROW|SEAL (after which no holder of the fd can write(2), map it
// writable, resize it, punch holes or add seals), and maps it read-only.
// The caller unmaps both (`bytes` each). `what` names the memfd in errors;
// on error nothing stays mapped.
absl::StatusOr<SealedMappings> SealKeepingOneWriter(int fd, uint64_t bytes, absl::string_view what);

}  // namespace tensord

#endif  // TENSORD_SERVICE_MEMORY_FUTURE_WRITE_SEAL_H_
