// Slots for small host versions, carved from shared arenas (HostArena) by
// size class and access domain, so a server's fds and mappings grow with
// its arenas, not with its tensors.
#ifndef TENSORD_SERVICE_MEMORY_ARENA_POOL_H_
#define TENSORD_SERVICE_MEMORY_ARENA_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/memory/host_bytes.h"

namespace tensord {

struct ArenaPoolOptions {
  // Versions up to this many bytes get a slot (--arena-max-tensor-bytes);
  // larger ones, and every one when 0, get a memfd of their own.
  uint64_t max_slot_bytes = uint64_t{1} << 20;
  // An arena holds at least this many bytes of slots, and at least
  // `min_slots_per_arena` slots.
  uint64_t min_arena_bytes = uint64_t{16} << 20;
  uint32_t min_slots_per_arena = 16;
};

// Counts at one moment, for metrics.
struct ArenaStats {
  uint64_t arenas = 0;
  uint64_t arena_bytes = 0;  // slots of every arena, used or not
  uint64_t slots_used = 0;
  uint64_t slot_bytes_used = 0;  // slot sizes, not tensor sizes
};

class ArenaPoolCore;
struct PooledArena;

// A version's bytes in one slot of an arena. Returns the slot to the pool
// when destroyed; the registry destroys it only when the version is gone
// and no lease holds it, so a slot is never reused under a reader.
class ArenaSlot final : public HostBytes {
 public:
  ~ArenaSlot() override;
  ArenaSlot(const ArenaSlot&) = delete;
  ArenaSlot& operator=(const ArenaSlot&) = delete;

  absl::Status Write(uint64_t offset, std::span<const std::span<const uint8_t>> pieces) override;
  using HostBytes::Write;
  absl::Status ReadFrom(int fd, uint64_t file_offset, uint64_t offset, uint64_t length) override;
  // Allocate() allocated them.
  absl::Status AllocatePages() override { return absl::OkStatus(); }
  absl::Status Seal() override {
    sealed_ = true;
    return absl::OkStatus();
  }
  bool sealed() const override { return sealed_; }
  const uint8_t* data() const override;
  uint64_t size() const override { return size_; }
  int fd() const override;
  uint64_t mapping_size() const override;
  uint64_t mapping_offset() const override;
  uint64_t arena_id() const override;
  uint64_t slot_bytes() const;

 private:
  friend class ArenaPool;
  ArenaSlot(std::shared_ptr<PooledArena> arena, uint32_t index, uint64_t size)
      : arena_(std::move(arena)), size_(size), index_(index) {}

  std::shared_ptr<PooledArena> arena_;
  const uint64_t size_;
  const uint32_t index_;
  bool sealed_ = false;
};

// Thread-safe. Slots of one arena are all of one size class and one access
// domain: an fd handed to a reader of one slot maps every slot of its
// arena, so the caller puts in one domain only versions that the same
// readers may read (docs/architecture.md, "Access domains").
class ArenaPool {
 public:
  explicit ArenaPool(const ArenaPoolOptions& options);
  ~ArenaPool();
  ArenaPool(const ArenaPool&) = delete;
  ArenaPool& operator=(const ArenaPool&) = delete;

  // The slot a version of `size` bytes gets: a multiple of the page size
  // at most a quarter above `size` (plus page rounding); 0 when it gets a
  // memfd of its own (above max_slot_bytes rounded down to a page, or
  // arenas off).
  uint64_t SlotBytesFor(uint64_t size) const;

  // True when this kernel has F_SEAL_FUTURE_WRITE (Linux >= 5.1), which
  // arenas need; without it every version gets a memfd of its own.
  static bool Supported();

  // A writable, zeroed slot for `size` bytes (SlotBytesFor(size) must be
  // nonzero) in an arena of `domain`. RESOURCE_EXHAUSTED when a new arena
  // needs an fd or a mapping that the limits do not allow, or the pages
  // have no memory.
  absl::StatusOr<std::unique_ptr<ArenaSlot>> Allocate(uint64_t size, absl::string_view domain);

  ArenaStats Stats() const;
  const std::vector<uint64_t>& size_classes() const { return size_classes_; }

 private:
  const ArenaPoolOptions options_;
  // Slot sizes, ascending.
  const std::vector<uint64_t> size_classes_;
  // Outlives the pool while slots remain (they return themselves to it).
  std::shared_ptr<ArenaPoolCore> core_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_MEMORY_ARENA_POOL_H_
