#include "service/transport/call_threads.h"

#include <atomic>
#include <future>
#include <thread>

#include "gtest/gtest.h"

namespace tensord {
namespace {

TEST(CallThreadsTest, RunReturnsBeforeTheWorkAndDestructionWaitsForIt) {
  std::atomic<int> finished{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> ran_on_caller{false};
  {
    CallThreads threads;
    for (int i = 0; i < 8; ++i) {
      threads.Run([&, released] {
        if (std::this_thread::get_id() == caller) ran_on_caller = true;
        released.wait();
        finished.fetch_add(1);
      });
    }
    // Every piece of work is blocked until now, so Run did not wait for any.
    EXPECT_EQ(finished.load(), 0);
    release.set_value();
  }
  EXPECT_EQ(finished.load(), 8);
  EXPECT_FALSE(ran_on_caller.load());
}

TEST(CallThreadsTest, FinishedThreadsAreJoinedByLaterRuns) {
  std::atomic<int> finished{0};
  CallThreads threads;
  for (int i = 0; i < 200; ++i) {
    threads.Run([&] { finished.fetch_add(1); });
  }
  // Bounded: reaping keeps at most the unfinished ones; all must end.
  for (int spin = 0; spin < 2000 && finished.load() < 200; ++spin) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(finished.load(), 200);
}

}  // namespace
}  // namespace tensord
