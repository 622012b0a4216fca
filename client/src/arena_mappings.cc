#include "client/src/arena_mappings.h"

#include <sys/mman.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"

namespace tensord {

ArenaMapping::~ArenaMapping() { ::munmap(const_cast<uint8_t*>(data_), size_); }

absl::StatusOr<std::shared_ptr<const ArenaMapping>> ArenaMappings::Get(uint64_t arena_id,
                                                                       ScopedFd fd, uint64_t size) {
  {
    MutexLock lock(&mutex_);
    auto it = arenas_.find(arena_id);
    if (it != arenas_.end()) {
      if (std::shared_ptr<const ArenaMapping> held = it->second.lock()) {
        if (held->size() != size) {
          return absl::InternalError(absl::StrCat("arena ", arena_id, " was ", held->size(),
                                                  " bytes and is now said to be ", size));
        }
        return held;
      }
    }
  }
  if (!fd.valid()) {
    return absl::InternalError(absl::StrCat("arena ", arena_id, " came without an fd"));
  }
  if (size == 0) return absl::InternalError(absl::StrCat("arena ", arena_id, " of 0 bytes"));
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) {
    return MappingErrnoStatus(errno,
                              absl::StrCat("mmap of arena ", arena_id, " (", size, " bytes)"));
  }
  std::shared_ptr<const ArenaMapping> mapping(
      new ArenaMapping(std::move(fd), static_cast<const uint8_t*>(data), size));
  MutexLock lock(&mutex_);
  auto& slot = arenas_[arena_id];
  // Another thread may have mapped it meanwhile: keep one.
  if (std::shared_ptr<const ArenaMapping> raced = slot.lock()) return raced;
  absl::erase_if(arenas_, [](const auto& entry) { return entry.second.expired(); });
  arenas_[arena_id] = mapping;
  return mapping;
}

size_t ArenaMappings::mapped() const {
  MutexLock lock(&mutex_);
  size_t count = 0;
  for (const auto& [id, weak] : arenas_) count += weak.expired() ? 0 : 1;
  return count;
}

std::vector<std::pair<uint64_t, std::shared_ptr<const ArenaMapping>>> ArenaMappings::Pin() const {
  std::vector<std::pair<uint64_t, std::shared_ptr<const ArenaMapping>>> pinned;
  MutexLock lock(&mutex_);
  for (const auto& [id, weak] : arenas_) {
    if (std::shared_ptr<const ArenaMapping> held = weak.lock())
      pinned.emplace_back(id, std::move(held));
  }
  return pinned;
}

}  // namespace tensord
