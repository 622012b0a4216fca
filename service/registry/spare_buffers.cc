#include "service/registry/spare_buffers.h"

#include <algorithm>
#include <iterator>
#include <system_error>

namespace tensord {

std::shared_ptr<SpareBuffers> SpareBuffers::Create(const SpareBufferOptions& options,
                                                   std::shared_ptr<CapacityAccount> capacity) {
  return std::shared_ptr<SpareBuffers>(new SpareBuffers(options, std::move(capacity)));
}

SpareBuffers::~SpareBuffers() {
  std::thread releaser;
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    releaser = std::move(releaser_);  // none starts once stopping_ is set
  }
  changed_.SignalAll();
  if (releaser.joinable()) releaser.join();
}

RecycleMemfd SpareBuffers::RecyclerFor(std::string domain) {
  // A buffer may outlive the registry (a reader's lease): then its memfd
  // is simply freed.
  return [weak = weak_from_this(), domain = std::move(domain)](SpareMemfd memfd) {
    if (std::shared_ptr<SpareBuffers> spares = weak.lock()) {
      spares->Keep(domain, std::move(memfd));
    }
  };
}

std::optional<SpareBuffers::Reused> SpareBuffers::Take(uint64_t size, const std::string& domain) {
  std::optional<Kept> taken;
  {
    MutexLock lock(&mutex_);
    auto it = kept_.find(Key(domain, size));
    if (it == kept_.end()) return std::nullopt;
    taken.emplace(std::move(it->second.back()));  // the most recently used: warmest
    it->second.pop_back();
    if (it->second.empty()) kept_.erase(it);
    --kept_buffers_;
    kept_bytes_.fetch_sub(size, std::memory_order_relaxed);
    ++reuses_;
  }
  absl::StatusOr<std::unique_ptr<HostBuffer>> buffer =
      HostBuffer::Reuse(std::move(taken->memfd), RecyclerFor(domain));
  if (!buffer.ok()) return std::nullopt;  // the spare is freed; a new memfd serves
  // Its room passes to the put whole: the budget never counts it twice.
  return Reused{*std::move(buffer), std::move(taken->reservation)};
}

absl::StatusOr<std::unique_ptr<HostBuffer>> SpareBuffers::Create(uint64_t size,
                                                                 absl::string_view debug_name,
                                                                 std::string domain) {
  return HostBuffer::Create(size, debug_name, PagePolicy::kNormal, RecyclerFor(std::move(domain)));
}

void SpareBuffers::DropLocked(std::map<Key, std::vector<Kept>>::iterator it, size_t index,
                              std::vector<SpareMemfd>& dropped) {
  Kept& kept = it->second[index];
  kept.reservation.Reset();  // at once: host_bytes_used() subtracts kept_bytes_
  kept_bytes_.fetch_sub(kept.memfd.size(), std::memory_order_relaxed);
  --kept_buffers_;
  dropped.push_back(std::move(kept.memfd));
  it->second.erase(it->second.begin() + static_cast<ptrdiff_t>(index));
  if (it->second.empty()) kept_.erase(it);
}

void SpareBuffers::Keep(std::string domain, SpareMemfd memfd) {
  const uint64_t size = memfd.size();
  if (size > options_.max_bytes || options_.max_buffers == 0) return;
  std::vector<SpareMemfd> dropped;  // freed after the lock: munmap of many pages
  {
    MutexLock lock(&mutex_);
    if (stopping_) return;
    if (!releaser_.joinable()) {
      try {
        releaser_ = std::thread([this] { ReleaseIdle(); });
      } catch (const std::system_error&) {
        return;  // no thread to free idle spares: keep none (freed here)
      }
    }
    // Room for the newest first: the oldest spares are the least likely taken.
    while (kept_buffers_ > 0 &&
           (kept_buffers_ >= options_.max_buffers ||
            kept_bytes_.load(std::memory_order_relaxed) + size > options_.max_bytes)) {
      auto oldest = kept_.begin();
      for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        if (it->second.front().since < oldest->second.front().since) oldest = it;
      }
      DropLocked(oldest, 0, dropped);
    }
    absl::StatusOr<ByteReservation> reservation = capacity_->Reserve(size);
    if (!reservation.ok()) return;  // the budget has no room: freed now
    kept_[Key(std::move(domain), size)].push_back(
        Kept{std::move(memfd), *std::move(reservation), Clock::now()});
    ++kept_buffers_;
    kept_bytes_.fetch_add(size, std::memory_order_relaxed);
  }
  changed_.SignalAll();
}

uint64_t SpareBuffers::Release(uint64_t bytes) {
  std::vector<SpareMemfd> dropped;
  uint64_t freed = 0;
  MutexLock lock(&mutex_);
  while (freed < bytes && kept_buffers_ > 0) {
    auto largest = std::max_element(kept_.begin(), kept_.end(), [](const auto& a, const auto& b) {
      return a.first.second < b.first.second;
    });
    freed += largest->first.second;
    DropLocked(largest, 0, dropped);
  }
  return freed;  // `dropped` is freed after the lock (declared before it)
}

SpareBufferStats SpareBuffers::Stats() const {
  MutexLock lock(&mutex_);
  return SpareBufferStats{kept_buffers_, kept_bytes_.load(std::memory_order_relaxed), reuses_};
}

void SpareBuffers::ReleaseIdle() {
  const auto idle_release = absl::ToChronoNanoseconds(options_.idle_release);
  MutexLock lock(&mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    std::optional<Clock::time_point> next;
    std::vector<SpareMemfd> dropped;
    for (auto it = kept_.begin(); it != kept_.end();) {
      auto following = std::next(it);
      // Each list is oldest first.
      while (it != kept_.end() && now - it->second.front().since >= idle_release) {
        const bool last = it->second.size() == 1;
        DropLocked(it, 0, dropped);
        if (last) it = kept_.end();  // erased with its last spare
      }
      if (it != kept_.end()) {
        const Clock::time_point due = it->second.front().since + idle_release;
        next = next.has_value() ? std::min(*next, due) : due;
      }
      it = following;
    }
    if (!dropped.empty()) {
      mutex_.Unlock();
      dropped.clear();
      mutex_.Lock();
      continue;  // re-reads the spares: more may have come meanwhile
    }
    if (next.has_value()) {
      changed_.WaitWithTimeout(&mutex_, absl::FromChrono(*next - Clock::now()));
    } else {
      changed_.Wait(&mutex_);
    }
  }
}

}  // namespace tensord
