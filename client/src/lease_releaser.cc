#include "client/src/lease_releaser.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "client/src/fork_generation.h"
#include "service/wire/batch_limits.h"

namespace tensord {

LeaseReleaser::LeaseReleaser(Drain drain, absl::Duration delay)
    : drain_(std::move(drain)), delay_(delay), owner_fork_generation_(ForkGeneration()) {}

LeaseReleaser::~LeaseReleaser() {
  std::thread thread;
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  queued_.SignalAll();
  sent_.SignalAll();
  if (thread.joinable()) thread.join();
}

void LeaseReleaser::Release(uint64_t lease_id) {
  // A fork's child has the parent's connection, whose leases are the
  // parent's to end (and the parent's thread is not in the child).
  if (ForkGeneration() != owner_fork_generation_) return;
  MutexLock lock(&mutex_);
  StartThreadLocked();
  if (QueueLocked(lease_id)) queued_.Signal();
}

void LeaseReleaser::Release(std::span<const uint64_t> lease_ids) {
  if (lease_ids.empty() || ForkGeneration() != owner_fork_generation_) return;
  MutexLock lock(&mutex_);
  StartThreadLocked();
  bool wake = false;
  for (uint64_t lease_id : lease_ids) wake |= QueueLocked(lease_id);
  if (wake) queued_.Signal();
}

void LeaseReleaser::StartThreadLocked() {
  if (thread_.joinable() || stopping_) return;
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (...) {
    // Out of threads, memory or mappings (std::system_error, or
    // std::bad_alloc): the ids ride on the next request.
  }
}

bool LeaseReleaser::QueueLocked(uint64_t lease_id) {
  if (pending_.empty()) first_queued_tick_ = tick_;
  pending_.push_back(lease_id);
  ++queued_total_;
  // A ticking thread finds the ids by itself: waking it for each would cost
  // a context switch per dropped tensor in a loop of single fetches.
  return (asleep_ && pending_.size() == 1) || pending_.size() == kMaxLeasesPerRelease;
}

std::vector<uint64_t> LeaseReleaser::Take() {
  MutexLock lock(&mutex_);
  const size_t count = std::min(pending_.size(), kMaxLeasesPerRelease);
  std::vector<uint64_t> batch(pending_.begin(), pending_.begin() + count);
  // pending_ keeps its memory: growing it again from nothing, id by id,
  // as a dropped batch's tensors queue theirs, costs more than the copy.
  pending_.erase(pending_.begin(), pending_.begin() + count);
  return batch;
}

void LeaseReleaser::Sent(size_t count) {
  {
    MutexLock lock(&mutex_);
    sent_total_ += count;
  }
  sent_.SignalAll();
}

void LeaseReleaser::Flush() {
  MutexLock lock(&mutex_);
  const uint64_t target = queued_total_;
  StartThreadLocked();
  // With no thread the ids wait for the next request; nothing else sends them.
  if (!thread_.joinable()) return;
  while (sent_total_ < target && !stopping_) sent_.Wait(&mutex_);
}

void LeaseReleaser::Run() {
  int idle_ticks = 0;
  while (true) {
    {
      MutexLock lock(&mutex_);
      if (stopping_) return;
      if (pending_.empty() && idle_ticks >= kIdleTicksBeforeSleep) {
        asleep_ = true;
        while (pending_.empty() && !stopping_) queued_.Wait(&mutex_);
        asleep_ = false;
        idle_ticks = 0;
        if (stopping_) return;
      }
      // Ids queued before this tick have had one tick for a request to
      // carry them; a full batch goes at once.
      const bool due = !pending_.empty() &&
                       (first_queued_tick_ < tick_ || pending_.size() >= kMaxLeasesPerRelease);
      if (!due) {
        idle_ticks = pending_.empty() ? idle_ticks + 1 : 0;
        ++tick_;
        queued_.WaitWithTimeout(&mutex_, delay_);
        continue;
      }
      idle_ticks = 0;
    }
    drain_();
  }
}

}  // namespace tensord
