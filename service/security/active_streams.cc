#include "service/security/active_streams.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/log.h"

namespace tensord {

ActiveStreams::ActiveStreams(const StreamLimits& limits) : limits_(limits) {
  if (limits_.idle_timeout != absl::InfiniteDuration()) {
    watchdog_ = std::thread([this] { Watch(); });
  }
}

ActiveStreams::~ActiveStreams() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  changed_.SignalAll();
  if (watchdog_.joinable()) watchdog_.join();
}

absl::StatusOr<std::unique_ptr<ActiveStreams::Slot>> ActiveStreams::Admit(
    absl::string_view rpc, std::function<void()> cancel) {
  MutexLock lock(&mutex_);
  const int64_t open = static_cast<int64_t>(entries_.size());
  if (limits_.max_streams > 0 && open >= limits_.max_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat(rpc, " refused: ", open,
                     " Put/Fetch streams are open, the limit (--max-concurrent-streams) is ",
                     limits_.max_streams, "; retry later"));
  }
  auto entry = std::make_unique<Entry>();
  entry->rpc = std::string(rpc);
  entry->cancel = std::move(cancel);
  entry->last_progress_nanos.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
  Entry* raw = entry.get();
  const uint64_t id = next_id_++;
  entries_.emplace(id, std::move(entry));
  return std::unique_ptr<Slot>(new Slot(*this, id, raw));
}

int64_t ActiveStreams::open_streams() const {
  MutexLock lock(&mutex_);
  return static_cast<int64_t>(entries_.size());
}

void ActiveStreams::Release(uint64_t id) {
  MutexLock lock(&mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& entry = *it->second;
  // gRPC may end the call inline inside the watchdog's cancel (same thread):
  // then there is nobody to wait for. Otherwise the call (and what `cancel`
  // points at) must stay alive until the cancel returned.
  if (entry.canceller != std::this_thread::get_id()) {
    while (entry.cancel_running) changed_.Wait(&mutex_);
  }
  entries_.erase(id);
}

void ActiveStreams::Watch() {
  // Checking a few times per timeout keeps the overshoot small.
  const absl::Duration period =
      std::clamp(limits_.idle_timeout / 4, absl::Milliseconds(10), absl::Seconds(1));
  MutexLock lock(&mutex_);
  while (!stopping_) {
    const absl::Time wake_at = absl::Now() + period;
    while (!stopping_ && !changed_.WaitWithDeadline(&mutex_, wake_at)) {
    }
    if (stopping_) break;
    mutex_.Unlock();
    CancelIdle();
    mutex_.Lock();
  }
}

void ActiveStreams::CancelIdle() {
  const int64_t now = absl::GetCurrentTimeNanos();
  const int64_t timeout = absl::ToInt64Nanoseconds(limits_.idle_timeout);
  std::vector<uint64_t> idle;
  {
    MutexLock lock(&mutex_);
    for (auto& [id, entry] : entries_) {
      if (entry->cancel_started) continue;
      if (now - entry->last_progress_nanos.load(std::memory_order_relaxed) < timeout) continue;
      entry->cancel_started = true;
      idle.push_back(id);
    }
  }
  for (uint64_t id : idle) {
    std::function<void()> cancel;
    {
      MutexLock lock(&mutex_);
      auto it = entries_.find(id);
      if (it == entries_.end()) continue;  // ended on its own meanwhile
      it->second->cancel_running = true;
      it->second->canceller = std::this_thread::get_id();
      cancel = it->second->cancel;
      Log(LogLevel::kInfo, "stream_idle_cancelled",
          {{"rpc", it->second->rpc}, {"idle_timeout", absl::FormatDuration(limits_.idle_timeout)}});
    }
    cancel();
    {
      MutexLock lock(&mutex_);
      // The slot may have ended inside cancel() on this thread and be gone.
      if (auto it = entries_.find(id); it != entries_.end()) it->second->cancel_running = false;
    }
    changed_.SignalAll();
  }
}

}  // namespace tensord
