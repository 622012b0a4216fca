#include "service/memory/arena_pool.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "service/common/mutex.h"
#include "service/common/status_macros.h"
#include "service/memory/host_arena.h"

namespace tensord {
namespace {

constexpr size_t kNotListed = std::numeric_limits<size_t>::max();

uint64_t PageBytes() { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }

uint64_t RoundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Four classes per doubling (page-rounded), so a slot wastes at most a
// quarter of its tensor's bytes plus the page rounding.
std::vector<uint64_t> SizeClasses(uint64_t max_slot_bytes) {
  std::vector<uint64_t> classes;
  if (max_slot_bytes == 0) return classes;
  const uint64_t page = PageBytes();
  // Rounded down: a tensor above the flag's value never gets a slot.
  const uint64_t largest = max_slot_bytes / page * page;
  if (largest == 0) return classes;
  for (uint64_t base = page;; base *= 2) {
    for (uint64_t step = 0; step < 4; ++step) {
      const uint64_t size = RoundUp(base + base * step / 4, page);
      if (size >= largest) {
        classes.push_back(largest);
        return classes;
      }
      if (classes.empty() || size > classes.back()) classes.push_back(size);
    }
  }
}

}  // namespace

// Arenas of one size class and one domain.
struct ClassList {
  // Arenas with a free slot; full ones are held only by their slots.
  std::vector<std::shared_ptr<PooledArena>> with_free;
};

struct PooledArena {
  PooledArena(std::unique_ptr<HostArena> memory, uint64_t id, ClassList* list,
              std::shared_ptr<ArenaPoolCore> core)
      : memory(std::move(memory)),
        id(id),
        list(list),
        core(std::move(core)),
        pages_allocated(this->memory->slot_count(), 0) {}

  const std::unique_ptr<HostArena> memory;
  const uint64_t id;
  ClassList* const list;  // owned by core, never moves
  const std::shared_ptr<ArenaPoolCore> core;
  // Written by a slot's owner only (one byte each, so owners of different
  // slots never race); a freed slot's byte is read by the next owner after
  // the pool's lock orders the two.
  std::vector<uint8_t> pages_allocated;
  // Guarded by core->mutex.
  std::vector<uint32_t> free_slots;
  uint32_t in_use = 0;
  size_t list_position = kNotListed;
};

class ArenaPoolCore {
 public:
  Mutex mutex;
  // Domain -> one list per size class. Node-based: lists never move.
  std::map<std::string, std::vector<ClassList>, std::less<>> domains ABSL_GUARDED_BY(mutex);
  uint64_t next_arena_id ABSL_GUARDED_BY(mutex) = 1;
  ArenaStats stats ABSL_GUARDED_BY(mutex);
  // Set when the pool is destroyed: freed slots no longer keep their arena.
  bool closed ABSL_GUARDED_BY(mutex) = false;

  static void List(PooledArena& arena) {
    arena.list_position = arena.list->with_free.size();
    arena.list->with_free.push_back(nullptr);  // the caller stores the pointer
  }
  // Takes `arena` off its list; returns the list's reference.
  static std::shared_ptr<PooledArena> Unlist(PooledArena& arena) {
    std::vector<std::shared_ptr<PooledArena>>& with_free = arena.list->with_free;
    const size_t position = arena.list_position;
    std::shared_ptr<PooledArena> removed = std::move(with_free[position]);
    if (position + 1 != with_free.size()) {
      with_free[position] = std::move(with_free.back());
      with_free[position]->list_position = position;
    }
    with_free.pop_back();
    arena.list_position = kNotListed;
    return removed;
  }
};

ArenaSlot::~ArenaSlot() {
  PooledArena& arena = *arena_;
  ArenaPoolCore& core = *arena.core;
  // Zeroed now, not at reuse: a deleted version (or a refused put's bytes)
  // must not stay readable to holders of the arena's fd until the slot
  // happens to be reused.
  if (arena.pages_allocated[index_] != 0) {
    std::memset(arena.memory->writable(index_), 0, arena.memory->slot_bytes());
  }
  // An arena left empty is dropped after unlocking: unmapping is slow.
  std::shared_ptr<PooledArena> released;
  MutexLock lock(&core.mutex);
  arena.free_slots.push_back(index_);
  --arena.in_use;
  --core.stats.slots_used;
  core.stats.slot_bytes_used -= arena.memory->slot_bytes();
  if (core.closed) return;
  if (arena.list_position == kNotListed) {
    ArenaPoolCore::List(arena);
    arena.list->with_free.back() = arena_;
  }
  // One empty arena per class stays, so a put that frees and refills a
  // slot does not create and destroy an arena each time.
  if (arena.in_use == 0 && arena.list->with_free.size() > 1) {
    released = ArenaPoolCore::Unlist(arena);
    --core.stats.arenas;
    core.stats.arena_bytes -= arena.memory->bytes();
  }
}

absl::Status ArenaSlot::Write(uint64_t offset, std::span<const std::span<const uint8_t>> pieces) {
  if (absl::StatusOr<uint64_t> fits = CheckWrite(sealed_, size_, offset, pieces); !fits.ok()) {
    return fits.status();
  }
  uint8_t* target = arena_->memory->writable(index_) + offset;
  for (std::span<const uint8_t> piece : pieces) {
    if (piece.empty()) continue;
    std::memcpy(target, piece.data(), piece.size());
    target += piece.size();
  }
  return absl::OkStatus();
}

absl::Status ArenaSlot::ReadFrom(int fd, uint64_t file_offset, uint64_t offset, uint64_t length) {
  TENSORD_RETURN_IF_ERROR(CheckWrite(sealed_, size_, offset, length));
  return PreadInto(fd, file_offset, arena_->memory->writable(index_) + offset, length);
}

const uint8_t* ArenaSlot::data() const { return arena_->memory->readable(index_); }
int ArenaSlot::fd() const { return arena_->memory->fd(); }
uint64_t ArenaSlot::mapping_size() const { return arena_->memory->bytes(); }
uint64_t ArenaSlot::mapping_offset() const { return index_ * arena_->memory->slot_bytes(); }
uint64_t ArenaSlot::arena_id() const { return arena_->id; }
uint64_t ArenaSlot::slot_bytes() const { return arena_->memory->slot_bytes(); }

ArenaPool::ArenaPool(const ArenaPoolOptions& options)
    : options_(options),
      size_classes_(SizeClasses(options.max_slot_bytes)),
      core_(std::make_shared<ArenaPoolCore>()) {}

ArenaPool::~ArenaPool() {
  // Arenas with free slots hold the core; dropping them here (slots in use
  // keep theirs) breaks the cycle.
  std::map<std::string, std::vector<ClassList>, std::less<>> domains;
  MutexLock lock(&core_->mutex);
  core_->closed = true;
  for (auto& [domain, lists] : core_->domains) {
    for (ClassList& list : lists) {
      for (std::shared_ptr<PooledArena>& arena : list.with_free) arena->list_position = kNotListed;
    }
  }
  domains.swap(core_->domains);
}

bool ArenaPool::Supported() {
  static const bool supported = HostArena::Create(PageBytes(), 1, "arena-probe").ok();
  return supported;
}

uint64_t ArenaPool::SlotBytesFor(uint64_t size) const {
  auto it = std::lower_bound(size_classes_.begin(), size_classes_.end(), size);
  return it == size_classes_.end() ? 0 : *it;
}

absl::StatusOr<std::unique_ptr<ArenaSlot>> ArenaPool::Allocate(uint64_t size,
                                                               absl::string_view domain) {
  auto it = std::lower_bound(size_classes_.begin(), size_classes_.end(), size);
  if (it == size_classes_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a version of ", size, " bytes does not fit an arena slot (the largest is ",
                     size_classes_.empty() ? 0 : size_classes_.back(), " bytes)"));
  }
  const uint64_t slot_bytes = *it;
  const size_t class_index = static_cast<size_t>(it - size_classes_.begin());
  std::unique_ptr<ArenaSlot> slot;
  ClassList* list = nullptr;
  {
    MutexLock lock(&core_->mutex);
    auto domain_it = core_->domains.find(domain);
    if (domain_it == core_->domains.end()) {
      domain_it =
          core_->domains.emplace(std::string(domain), std::vector<ClassList>(size_classes_.size()))
              .first;
    }
    list = &domain_it->second[class_index];
    if (!list->with_free.empty()) {
      std::shared_ptr<PooledArena> arena = list->with_free.back();
      const uint32_t index = arena->free_slots.back();
      arena->free_slots.pop_back();
      ++arena->in_use;
      if (arena->free_slots.empty()) (void)ArenaPoolCore::Unlist(*arena);
      ++core_->stats.slots_used;
      core_->stats.slot_bytes_used += slot_bytes;
      slot.reset(new ArenaSlot(std::move(arena), index, size));
    }
  }
  if (slot == nullptr) {
    // A new arena, made outside the lock (memfd, two mappings, seals).
    const uint32_t slot_count = static_cast<uint32_t>(std::max<uint64_t>(
        options_.min_slots_per_arena, RoundUp(options_.min_arena_bytes, slot_bytes) / slot_bytes));
    absl::StatusOr<std::unique_ptr<HostArena>> memory =
        HostArena::Create(slot_bytes, slot_count, absl::StrCat("arena-", slot_bytes));
    if (!memory.ok()) return memory.status();
    MutexLock lock(&core_->mutex);
    auto arena =
        std::make_shared<PooledArena>(*std::move(memory), core_->next_arena_id++, list, core_);
    arena->free_slots.reserve(slot_count - 1);
    for (uint32_t index = slot_count - 1; index > 0; --index) arena->free_slots.push_back(index);
    arena->in_use = 1;
    ++core_->stats.arenas;
    core_->stats.arena_bytes += arena->memory->bytes();
    ++core_->stats.slots_used;
    core_->stats.slot_bytes_used += slot_bytes;
    if (!arena->free_slots.empty()) {
      ArenaPoolCore::List(*arena);
      list->with_free.back() = arena;
    }
    slot.reset(new ArenaSlot(std::move(arena), 0, size));
  }
  // From here the slot returns itself on every error path.
  PooledArena& arena = *slot->arena_;
  uint8_t& pages_allocated = arena.pages_allocated[slot->index_];
  // A used slot was zeroed when it was freed.
  if (pages_allocated == 0) {
    absl::Status allocated = arena.memory->AllocateSlot(slot->index_);
    if (!allocated.ok()) return allocated;
    pages_allocated = 1;
  }
  return slot;
}

ArenaStats ArenaPool::Stats() const {
  MutexLock lock(&core_->mutex);
  return core_->stats;
}

}  // namespace tensord
