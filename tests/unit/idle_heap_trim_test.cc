#include "service/common/idle_heap_trim.h"

#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace tensord {
namespace {

// Polls for up to 10 s.
template <typename Condition>
bool Eventually(Condition condition) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return condition();
}

TEST(IdleHeapTrimTest, NothingIsTrimmedBeforeATransferHasRun) {
  IdleHeapTrim trim(absl::Milliseconds(20));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(trim.trims(), 0u);
}

TEST(IdleHeapTrimTest, TrimsOnceTheDelayAfterTheLastTransferEnded) {
  IdleHeapTrim trim(absl::Milliseconds(200));
  const absl::Time ended_at = absl::Now();
  { IdleHeapTrim::Activity transfer(trim); }
  ASSERT_TRUE(Eventually([&] { return trim.trims() == 1; }));
  EXPECT_GE(absl::Now() - ended_at, absl::Milliseconds(200)) << "trimmed before the delay";
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(trim.trims(), 1u) << "one trim per quiet period";
}

TEST(IdleHeapTrimTest, NoTrimWhileATransferRunsAndOneAfterBackToBackTransfers) {
  IdleHeapTrim trim(absl::Milliseconds(50));
  auto running = std::make_unique<IdleHeapTrim::Activity>(trim);
  // Back-to-back transfers beside the running one end, but it still runs.
  for (int i = 0; i < 5; ++i) {
    IdleHeapTrim::Activity short_transfer(trim);
    absl::SleepFor(absl::Milliseconds(30));
  }
  absl::SleepFor(absl::Milliseconds(150));
  EXPECT_EQ(trim.trims(), 0u) << "trimmed while a transfer ran";
  running.reset();
  ASSERT_TRUE(Eventually([&] { return trim.trims() == 1; }));
}

TEST(IdleHeapTrimTest, ManyThreadsEndingTransfersLeaveATrimDue) {
  IdleHeapTrim trim(absl::Milliseconds(50));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) IdleHeapTrim::Activity transfer(trim);
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE(Eventually([&] { return trim.trims() >= 1; }));
  // Then quiet: no trim is due any more.
  const uint64_t settled = trim.trims();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(trim.trims(), settled);
}

TEST(IdleHeapTrimTest, TheBackstopTrimsWithoutTransfersButNotDuringOne) {
  IdleHeapTrim trim(absl::Hours(1), absl::Milliseconds(50));
  ASSERT_TRUE(Eventually([&] { return trim.trims() >= 2; }));
  IdleHeapTrim::Activity transfer(trim);
  absl::SleepFor(absl::Milliseconds(20));  // a trim under way when it began ends
  const uint64_t before = trim.trims();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(trim.trims(), before) << "trimmed while a transfer ran";
}

TEST(IdleHeapTrimTest, DestroysPromptlyWithATrimDue) {
  const absl::Time start = absl::Now();
  {
    IdleHeapTrim trim(absl::Hours(1));
    IdleHeapTrim::Activity transfer(trim);
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace tensord
