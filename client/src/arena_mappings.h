// The server's shared arenas (small host versions, many per memfd) mapped
// into this process: one read-only mapping per arena, shared by every
// version held from it, so holding a million small tensors does not make a
// million mappings or keep a million fds.
#ifndef TENSORD_CLIENT_SRC_ARENA_MAPPINGS_H_
#define TENSORD_CLIENT_SRC_ARENA_MAPPINGS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "service/common/mutex.h"
#include "service/common/scoped_fd.h"

namespace tensord {

// One arena: its fd (for private copy-on-write views of a slot) and its
// read-only shared mapping. Unmapped and closed when the last version held
// from it is gone.
class ArenaMapping {
 public:
  ~ArenaMapping();
  ArenaMapping(const ArenaMapping&) = delete;
  ArenaMapping& operator=(const ArenaMapping&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_.get(); }

 private:
  friend class ArenaMappings;
  ArenaMapping(ScopedFd fd, const uint8_t* data, uint64_t size)
      : fd_(std::move(fd)), data_(data), size_(size) {}

  ScopedFd fd_;
  const uint8_t* data_;
  uint64_t size_;
};

// The arenas of one handoff connection (arena ids are the server's, per
// connection's server). Thread-safe.
class ArenaMappings {
 public:
  // The mapping of arena `arena_id`: the one already held, or `fd` mapped
  // read-only for `size` bytes. `fd` is closed when it is not needed.
  absl::StatusOr<std::shared_ptr<const ArenaMapping>> Get(uint64_t arena_id, ScopedFd fd,
                                                          uint64_t size);

  // Arenas mapped now (for tests and diagnostics).
  size_t mapped() const;
  // The arenas mapped now, kept mapped while the result lives: what a batch
  // acquire tells the server it need not send again.
  std::vector<std::pair<uint64_t, std::shared_ptr<const ArenaMapping>>> Pin() const;

 private:
  mutable Mutex mutex_;
  absl::flat_hash_map<uint64_t, std::weak_ptr<const ArenaMapping>> arenas_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_ARENA_MAPPINGS_H_
