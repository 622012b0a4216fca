#include "service/security/active_streams.h"

#include <atomic>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "service/common/mutex.h"

namespace tensord {
namespace {

TEST(ActiveStreamsTest, RefusesBeyondTheLimitAndFreesPlacesOnRelease) {
  ActiveStreams streams({.max_streams = 2});
  auto first = streams.Admit("Put", [] {});
  auto second = streams.Admit("Fetch", [] {});
  ASSERT_TRUE(first.ok() && second.ok());
  absl::StatusOr<std::unique_ptr<ActiveStreams::Slot>> third = streams.Admit("Fetch", [] {});
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("limit (--max-concurrent-streams) is 2"),
            std::string::npos)
      << third.status();
  first->reset();  // the slot, not the StatusOr
  EXPECT_EQ(streams.open_streams(), 1);
  EXPECT_TRUE(streams.Admit("Put", [] {}).ok());
}

// Polls `done` for up to 10 s; the watchdog runs every few milliseconds here.
bool EventuallyTrue(const std::atomic<bool>& done) {
  for (int i = 0; i < 1000 && !done.load(); ++i) absl::SleepFor(absl::Milliseconds(10));
  return done.load();
}

TEST(ActiveStreamsTest, CancelsAnIdleStreamOnceAndSparesABusyOne) {
  ActiveStreams streams({.idle_timeout = absl::Milliseconds(50)});
  std::atomic<int> idle_cancels{0};
  std::atomic<bool> idle_cancelled{false};
  std::atomic<int> busy_cancels{0};
  auto idle = streams.Admit("Fetch", [&] {
    idle_cancels.fetch_add(1);
    idle_cancelled.store(true);
  });
  auto busy = streams.Admit("Put", [&] { busy_cancels.fetch_add(1); });
  ASSERT_TRUE(idle.ok() && busy.ok());
  std::atomic<bool> stop{false};
  std::thread toucher([&] {
    for (int i = 0; i < 5000 && !stop.load(); ++i) {
      (*busy)->Touch();
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  EXPECT_TRUE(EventuallyTrue(idle_cancelled));
  // A few more watchdog rounds must not cancel it again.
  absl::SleepFor(absl::Milliseconds(200));
  stop.store(true);
  toucher.join();
  EXPECT_EQ(idle_cancels.load(), 1);
  EXPECT_EQ(busy_cancels.load(), 0);
}

TEST(ActiveStreamsTest, ASlotMayEndInsideItsOwnCancel) {
  ActiveStreams streams({.idle_timeout = absl::Milliseconds(20)});
  Mutex slot_mutex;
  std::unique_ptr<ActiveStreams::Slot> slot;
  std::atomic<bool> ended{false};
  // gRPC may run OnDone inline in TryCancel: the slot then ends on the
  // watchdog's own thread, which must neither deadlock nor touch it after.
  auto admitted = streams.Admit("Put", [&] {
    MutexLock lock(&slot_mutex);
    slot.reset();
    ended.store(true);
  });
  ASSERT_TRUE(admitted.ok());
  {
    MutexLock lock(&slot_mutex);
    slot = std::move(*admitted);
  }
  EXPECT_TRUE(EventuallyTrue(ended));
  EXPECT_EQ(streams.open_streams(), 0);
}

}  // namespace
}  // namespace tensord
