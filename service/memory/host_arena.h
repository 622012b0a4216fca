// One shared memfd that holds many small host versions, one per slot. The
// server maps it writable once and then seals it with F_SEAL_FUTURE_WRITE:
// from then on that one mapping is the only way to change a byte. An fd
// handed to a reader (or reopened through /proc) maps read-only or
// privately, and write(2), ftruncate(2) and hole punching fail.
#ifndef TENSORD_SERVICE_MEMORY_HOST_ARENA_H_
#define TENSORD_SERVICE_MEMORY_HOST_ARENA_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/scoped_fd.h"

namespace tensord {

// Thread-safe: the mappings are fixed; which slot a caller may write is the
// allocator's business (ArenaPool).
class HostArena {
 public:
  // `slot_count` slots of `slot_bytes` (a multiple of the page size) each,
  // no page allocated yet. `debug_name` shows as "memfd:tensord:<name>" in
  // /proc/PID/fd and /proc/PID/maps. RESOURCE_EXHAUSTED naming the limit
  // when fds or mappings run out.
  static absl::StatusOr<std::unique_ptr<HostArena>> Create(uint64_t slot_bytes, uint32_t slot_count,
                                                           absl::string_view debug_name);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  // Allocates the pages of `slot` (charged to this process, and
  // RESOURCE_EXHAUSTED now rather than SIGBUS at the first write when
  // memory is short). They come zeroed.
  absl::Status AllocateSlot(uint32_t slot);

  uint8_t* writable(uint32_t slot) const { return writable_ + slot * slot_bytes_; }
  const uint8_t* readable(uint32_t slot) const { return readable_ + slot * slot_bytes_; }

  int fd() const { return fd_.get(); }
  uint64_t bytes() const { return slot_bytes_ * slot_count_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint32_t slot_count() const { return slot_count_; }

 private:
  HostArena(ScopedFd fd, uint8_t* writable, const uint8_t* readable, uint64_t slot_bytes,
            uint32_t slot_count)
      : fd_(std::move(fd)),
        writable_(writable),
        readable_(readable),
        slot_bytes_(slot_bytes),
        slot_count_(slot_count) {}

  ScopedFd fd_;
  uint8_t* const writable_;
  // What published bytes are read through, so no reader in this process
  // holds a pointer that could write them.
  const uint8_t* const readable_;
  const uint64_t slot_bytes_;
  const uint32_t slot_count_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_MEMORY_HOST_ARENA_H_
