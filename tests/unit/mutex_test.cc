// The project's one mutex type and what waits on it: CondVar's deadlines and
// Notification.
#include "service/common/mutex.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tensord {
namespace {

TEST(CondVarTest, AWaitWithAPassedDeadlineSaysSoWithoutBlocking) {
  Mutex mutex;
  CondVar changed;
  MutexLock lock(&mutex);
  const absl::Time start = absl::Now();
  EXPECT_TRUE(changed.WaitWithDeadline(&mutex, start - absl::Seconds(1)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(CondVarTest, AWaitWithADeadlineReturnsOnceItPassed) {
  Mutex mutex;
  CondVar changed;
  MutexLock lock(&mutex);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(20);
  // Spurious wakes may return early: a caller loops until the deadline says so.
  while (!changed.WaitWithDeadline(&mutex, deadline)) {
  }
  EXPECT_GE(absl::Now(), deadline);
}

TEST(CondVarTest, ASignalWakesAWaiterWithoutADeadline) {
  Mutex mutex;
  CondVar changed;
  bool ready = false;
  std::thread signaller([&] {
    MutexLock lock(&mutex);
    ready = true;
    changed.SignalAll();
  });
  {
    MutexLock lock(&mutex);
    while (!ready) EXPECT_FALSE(changed.WaitWithDeadline(&mutex, absl::InfiniteFuture()));
  }
  signaller.join();
}

TEST(NotificationTest, AWaitTimesOutUntilNotifiedAndReturnsAtOnceAfter) {
  Notification done;
  EXPECT_FALSE(done.HasBeenNotified());
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(10)));
  std::thread notifier([&] { done.Notify(); });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  notifier.join();
  EXPECT_TRUE(done.HasBeenNotified());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::ZeroDuration()));
  done.WaitForNotification();
}

}  // namespace
}  // namespace tensord
