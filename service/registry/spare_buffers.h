// Memfds of large host versions that are gone, kept for the next put of the
// same size and access domain: the put then copies into pages that exist
// instead of allocating (and, on a VM, faulting in) new ones. Bounded in
// bytes and count, charged to the host budget like live versions, handed
// back when a put needs the room, and freed after an idle spell.
#ifndef TENSORD_SERVICE_REGISTRY_SPARE_BUFFERS_H_
#define TENSORD_SERVICE_REGISTRY_SPARE_BUFFERS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/common/mutex.h"
#include "service/memory/host_buffer.h"
#include "service/registry/capacity.h"

namespace tensord {

struct SpareBufferOptions {
  // Bytes of spares kept at once (--spare-put-bytes); 0 keeps none.
  uint64_t max_bytes = 0;
  // Spares kept at once: each holds an fd and two mappings.
  size_t max_buffers = 64;
  // Versions smaller than this get no recyclable buffer: their pages cost
  // little to allocate, and most go to arenas anyway.
  uint64_t min_buffer_bytes = uint64_t{1} << 20;
  // A spare no put took for this long is freed.
  absl::Duration idle_release = absl::Seconds(30);
};

// Counts at one moment, for metrics.
struct SpareBufferStats {
  uint64_t buffers = 0;  // kept now
  uint64_t bytes = 0;    // kept now
  uint64_t reuses = 0;   // puts that took a spare, since start
};

// Thread-safe. A spare of one access domain only ever serves a put of the
// same domain: a reader that kept a version's fd (or its mapping) past its
// lease sees whatever the memfd holds next, as with arena slots.
class SpareBuffers : public std::enable_shared_from_this<SpareBuffers> {
 public:
  // Spares are charged to `capacity` while kept.
  static std::shared_ptr<SpareBuffers> Create(const SpareBufferOptions& options,
                                              std::shared_ptr<CapacityAccount> capacity);
  ~SpareBuffers();
  SpareBuffers(const SpareBuffers&) = delete;
  SpareBuffers& operator=(const SpareBuffers&) = delete;

  // Whether a put of `size` bytes gets its buffer here.
  bool Serves(uint64_t size) const {
    return options_.max_bytes != 0 && size >= options_.min_buffer_bytes &&
           size <= options_.max_bytes;
  }

  // A kept spare of exactly `size` bytes (Serves(size)) in `domain`, as a
  // writable buffer holding stale bytes (the put writes them all) with the
  // room it held in the budget, which the put's own reservation becomes;
  // nullopt when none is kept.
  struct Reused {
    std::unique_ptr<HostBuffer> buffer;
    ByteReservation reservation;
  };
  std::optional<Reused> Take(uint64_t size, const std::string& domain);

  // A new zeroed memfd of `size` bytes for a put of a name in `domain`,
  // which comes back here when its version is gone.
  absl::StatusOr<std::unique_ptr<HostBuffer>> Create(uint64_t size, absl::string_view debug_name,
                                                     std::string domain);

  // Frees spares, largest first, until at least `bytes` went back to the
  // budget or none is left; returns the bytes freed.
  uint64_t Release(uint64_t bytes);

  SpareBufferStats Stats() const;
  // Stats().bytes without the lock: what the registry leaves out of the
  // bytes it reports as used.
  uint64_t kept_bytes() const { return kept_bytes_.load(std::memory_order_relaxed); }

 private:
  SpareBuffers(const SpareBufferOptions& options, std::shared_ptr<CapacityAccount> capacity)
      : options_(options), capacity_(std::move(capacity)) {}

  using Clock = std::chrono::steady_clock;
  struct Kept {
    SpareMemfd memfd;
    ByteReservation reservation;
    Clock::time_point since;
  };
  using Key = std::pair<std::string, uint64_t>;  // domain, size

  RecycleMemfd RecyclerFor(std::string domain);
  // A destroyed buffer's memfd: kept when the bounds and the budget allow.
  void Keep(std::string domain, SpareMemfd memfd);
  // Removes one kept spare (its room goes back to the budget at once, its
  // memfd into `dropped`, to be freed after the lock).
  void DropLocked(std::map<Key, std::vector<Kept>>::iterator it, size_t index,
                  std::vector<SpareMemfd>& dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Frees spares idle past options_.idle_release until stopped.
  void ReleaseIdle();

  const SpareBufferOptions options_;
  const std::shared_ptr<CapacityAccount> capacity_;

  mutable Mutex mutex_;
  CondVar changed_;
  // Each vector oldest first.
  std::map<Key, std::vector<Kept>> kept_ ABSL_GUARDED_BY(mutex_);
  uint64_t kept_buffers_ ABSL_GUARDED_BY(mutex_) = 0;
  std::atomic<uint64_t> kept_bytes_{0};  // written under mutex_, read without it
  uint64_t reuses_ ABSL_GUARDED_BY(mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // Started with the first spare kept.
  std::thread releaser_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_SPARE_BUFFERS_H_
