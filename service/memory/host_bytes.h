// A host version's bytes, wherever they live: a memfd of their own
// (HostBuffer) or a slot of a shared arena (ArenaSlot). Writable while a put
// fills them, immutable once sealed.
#ifndef TENSORD_SERVICE_MEMORY_HOST_BYTES_H_
#define TENSORD_SERVICE_MEMORY_HOST_BYTES_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tensord {

// Not thread-safe while writable; after Seal() every const method is.
class HostBytes {
 public:
  virtual ~HostBytes() = default;

  // Copies `pieces`, back to back, into the bytes at `offset`. Unsealed
  // only (FAILED_PRECONDITION after Seal); OUT_OF_RANGE past size();
  // RESOURCE_EXHAUSTED when the kernel has no memory for the pages.
  virtual absl::Status Write(uint64_t offset, std::span<const std::span<const uint8_t>> pieces) = 0;
  absl::Status Write(uint64_t offset, const void* bytes, uint64_t size) {
    const std::span<const uint8_t> piece(static_cast<const uint8_t*>(bytes), size);
    return Write(offset, std::span<const std::span<const uint8_t>>(&piece, 1));
  }

  // Reads `length` bytes at `file_offset` of `fd` straight into the bytes
  // at `offset` with pread: one copy, where Write from a buffer the caller
  // read the file into takes two. A hole reads as zeros, and a file that
  // changes meanwhile is an errno (or INVALID_ARGUMENT where it ends
  // first), never a fault in this process. Write's errors otherwise;
  // UNIMPLEMENTED where the bytes are not mapped writable here (the caller
  // copies through a buffer then).
  virtual absl::Status ReadFrom(int fd, uint64_t file_offset, uint64_t offset, uint64_t length) {
    return absl::UnimplementedError("these bytes are written through their fd only");
  }

  // Allocates every page now, charged to this process: a local producer
  // filling the bytes would otherwise carry tensord's memory (and could be
  // OOM-killed for it). RESOURCE_EXHAUSTED when the kernel has no memory.
  virtual absl::Status AllocatePages() = 0;

  // Ends writing for good; idempotent. After it no process, the server
  // included, changes the bytes through anything it hands out.
  virtual absl::Status Seal() = 0;
  virtual bool sealed() const = 0;

  // The bytes: valid once sealed, page aligned, never nullptr once sealed
  // (even for size 0).
  virtual const uint8_t* data() const = 0;
  virtual uint64_t size() const = 0;

  // What another process maps to read them: `fd()` from offset 0 for
  // `mapping_size()` bytes, the tensor starting `mapping_offset()` bytes
  // in. A shared arena (arena_id() != 0) holds other versions' bytes too,
  // so one mapping of it serves every version it holds.
  virtual int fd() const = 0;
  virtual uint64_t mapping_size() const = 0;
  virtual uint64_t mapping_offset() const { return 0; }
  // Nonzero, and unique within this process, for a slot of a shared arena.
  virtual uint64_t arena_id() const { return 0; }

 protected:
  // The bytes `pieces` hold, once checked to fit at `offset` of an
  // unsealed buffer of `size` bytes (Write's errors otherwise).
  static absl::StatusOr<uint64_t> CheckWrite(bool sealed, uint64_t size, uint64_t offset,
                                             std::span<const std::span<const uint8_t>> pieces);
  // The same for `length` bytes.
  static absl::Status CheckWrite(bool sealed, uint64_t size, uint64_t offset, uint64_t length);
  // ReadFrom's pread into `target`, checked.
  static absl::Status PreadInto(int fd, uint64_t file_offset, uint8_t* target, uint64_t length);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_MEMORY_HOST_BYTES_H_
