#include "service/common/errno_safe_connects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace tensord {
namespace {

// The first time an absl::Mutex queues a second waiter in a process, the
// waiter reads its thread's priority and the CPU's frequency: that is what
// set errno inside gRPC's connect. ctest runs each test in a process of
// its own, so the queue below is the process's first one. Returns the
// errno each waiter saw after it got the mutex.
std::vector<int> ErrnoAfterQueuedLocks() {
  constexpr int kWaiters = 3;
  absl::Mutex mu;
  std::atomic<int> waiting{0};
  std::vector<int> errno_seen(kWaiters, -1);
  mu.Lock();
  std::vector<std::thread> waiters;
  for (int w = 0; w < kWaiters; ++w) {
    waiters.emplace_back([&, w] {
      errno = 0;
      waiting++;
      mu.Lock();
      errno_seen[w] = errno;
      mu.Unlock();
    });
  }
  while (waiting.load() < kWaiters) absl::SleepFor(absl::Microseconds(50));
  absl::SleepFor(absl::Milliseconds(50));  // long enough for all to queue
  mu.Unlock();
  for (std::thread& waiter : waiters) waiter.join();
  return errno_seen;
}

TEST(ErrnoSafeConnectsTest, AFirstContendedMutexLeavesErrnoAloneOnceTheProcessIsPrepared) {
  MakeGrpcConnectsErrnoSafe();
  EXPECT_THAT(ErrnoAfterQueuedLocks(), ::testing::Each(0));
  MakeGrpcConnectsErrnoSafe();  // a second call is harmless
  EXPECT_THAT(ErrnoAfterQueuedLocks(), ::testing::Each(0));
}

}  // namespace
}  // namespace tensord
