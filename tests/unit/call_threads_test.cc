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
    CallThreads threads(8);
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(threads
                      .Run([&, released] {
                        if (std::this_thread::get_id() == caller) ran_on_caller = true;
                        released.wait();
                        finished.fetch_add(1);
                      })
                      .ok());
    }
    // A ninth is refused while eight run, and never runs.
    EXPECT_EQ(threads.Run([&] { finished.fetch_add(100); }).code(),
              absl::StatusCode::kResourceExhausted);
    // Every piece of work is blocked until now, so Run did not wait for any.
    EXPECT_EQ(finished.load(), 0);
    release.set_value();
  }
  EXPECT_EQ(finished.load(), 8);
  EXPECT_FALSE(ran_on_caller.load());
}

TEST(CallThreadsTest, FinishedThreadsAreJoinedByLaterRuns) {
  std::atomic<int> finished{0};
  CallThreads threads(1);
  // One at a time: each Run after the first succeeds only once the previous
  // work is done and its thread can be joined.
  for (int i = 0; i < 200; ++i) {
    absl::Status started;
    for (int attempt = 0; attempt < 5000; ++attempt) {
      started = threads.Run([&] { finished.fetch_add(1); });
      if (started.ok()) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_TRUE(started.ok()) << started;
  }
  for (int spin = 0; spin < 2000 && finished.load() < 200; ++spin) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(finished.load(), 200);
}

}  // namespace
}  // namespace tensord
