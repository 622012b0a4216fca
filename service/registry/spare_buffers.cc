#include "service/registry/spare_buffers.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "absl/time/clock.h"

namespace tensord {

std::shared_ptr<SpareBuffers> SpareBuffers::Create(const SpareBufferOptions& options,
                                                   std::shared_ptr<CapacityAccount> capacity) {
  return std::shared_ptr<SpareBuffers>(new SpareBuffers(options, std::move(capacity)));
}

SpareBuffers::~SpareBuffers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (releaser_.joinable()) releaser_.join();
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

absl::StatusOr<std::unique_ptr<HostBuffer>> SpareBuffers::Acquire(uint64_t size,
                                                                  absl::string_view debug_name,
                                                                  std::string domain) {
  std::optional<Kept> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kept_.find(Key(domain, size));
    if (it != kept_.end()) {
      taken.emplace(std::move(it->second.back()));  // the most recently used: warmest
      it->second.pop_back();
      if (it->second.empty()) kept_.erase(it);
      --kept_buffers_;
      kept_bytes_ -= size;
      ++reuses_;
    }
  }
  // The put holds its own reservation; the spare's goes back with `taken`.
  if (taken.has_value()) return HostBuffer::Reuse(std::move(taken->memfd), RecyclerFor(domain));
  return HostBuffer::Create(size, debug_name, PagePolicy::kNormal, RecyclerFor(std::move(domain)));
}

void SpareBuffers::Keep(std::string domain, SpareMemfd memfd) {
  const uint64_t size = memfd.size();
  if (size > options_.max_bytes || options_.max_buffers == 0) return;
  absl::StatusOr<ByteReservation> reservation = capacity_->Reserve(size);
  if (!reservation.ok()) return;  // the budget has no room: freed now
  std::vector<Kept> dropped;  // freed after the lock: munmap of many pages
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    // Room for the newest: the oldest spares are the least likely taken.
    while (kept_buffers_ > 0 && (kept_buffers_ >= options_.max_buffers ||
                                 kept_bytes_ + size > options_.max_bytes)) {
      auto oldest = kept_.end();
      for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        if (oldest == kept_.end() || it->second.front().since < oldest->second.front().since) {
          oldest = it;
        }
      }
      dropped.push_back(std::move(oldest->second.front()));
      oldest->second.erase(oldest->second.begin());
      if (oldest->second.empty()) kept_.erase(oldest);
      --kept_buffers_;
      kept_bytes_ -= dropped.back().memfd.size();
    }
    kept_[Key(std::move(domain), size)].push_back(
        Kept{std::move(memfd), *std::move(reservation), absl::Now()});
    ++kept_buffers_;
    kept_bytes_ += size;
    if (!releaser_.joinable()) releaser_ = std::thread([this] { ReleaseIdle(); });
  }
  changed_.notify_all();
}

uint64_t SpareBuffers::Release(uint64_t bytes) {
  std::vector<Kept> dropped;
  uint64_t freed = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (freed < bytes && kept_buffers_ > 0) {
      auto largest = std::max_element(kept_.begin(), kept_.end(), [](const auto& a, const auto& b) {
        return a.first.second < b.first.second;
      });
      dropped.push_back(std::move(largest->second.front()));
      largest->second.erase(largest->second.begin());
      if (largest->second.empty()) kept_.erase(largest);
      const uint64_t size = dropped.back().memfd.size();
      --kept_buffers_;
      kept_bytes_ -= size;
      freed += size;
    }
  }
  return freed;
}

SpareBufferStats SpareBuffers::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return SpareBufferStats{kept_buffers_, kept_bytes_.load(std::memory_order_relaxed), reuses_};
}

void SpareBuffers::ReleaseIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    std::vector<Kept> dropped;
    for (auto it = kept_.begin(); it != kept_.end();) {
      std::vector<Kept>& spares = it->second;
      auto fresh = std::find_if(spares.begin(), spares.end(), [&](const Kept& kept) {
        return now - kept.since < options_.idle_release;
      });
      for (auto stale = spares.begin(); stale != fresh; ++stale) {
        kept_bytes_ -= stale->memfd.size();
        --kept_buffers_;
        dropped.push_back(std::move(*stale));
      }
      spares.erase(spares.begin(), fresh);
      if (!spares.empty()) next = std::min(next, spares.front().since + options_.idle_release);
      it = spares.empty() ? kept_.erase(it) : std::next(it);
    }
    if (!dropped.empty()) {
      lock.unlock();
      dropped.clear();
      lock.lock();
      continue;  // re-reads the spares: more may have come meanwhile
    }
    if (next == absl::InfiniteFuture()) {
      changed_.wait(lock);
    } else {
      changed_.wait_for(lock, absl::ToChronoNanoseconds(next - now));
    }
  }
}

}  // namespace tensord
