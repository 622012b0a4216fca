// The project's mutex: std::shared_mutex with Abseil's thread-safety
// annotations. Debian's Abseil is built without ThreadSanitizer hooks, so an
// absl::Mutex is invisible to TSan and every section it guards would be
// reported as a race; pthread-based locks are seen by TSan's interceptors.
#ifndef TENSORD_SERVICE_COMMON_MUTEX_H_
#define TENSORD_SERVICE_COMMON_MUTEX_H_

#include <algorithm>
#include <condition_variable>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tensord {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mutex_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mutex_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mutex_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mutex_.unlock_shared(); }

 private:
  std::shared_mutex mutex_;
};

// Holds `mutex` exclusively for the scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) ABSL_EXCLUSIVE_LOCK_FUNCTION(mutex) : mutex_(mutex) {
    mutex_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mutex_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mutex_;
};

// Holds `mutex` shared for the scope.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mutex) ABSL_SHARED_LOCK_FUNCTION(mutex) : mutex_(mutex) {
    mutex_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mutex_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mutex_;
};

// A condition variable for Mutex (exclusive holders only). Spurious wakes
// happen: wait in a loop on the condition.
class CondVar {
 public:
  // Releases `mutex` while waiting; holds it again on return.
  void Wait(Mutex* mutex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    Adapter held{mutex};
    cv_.wait(held);
  }
  // Wait for at most `timeout`; true when it passed without a signal.
  bool WaitWithTimeout(Mutex* mutex, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    Adapter held{mutex};
    if (timeout == absl::InfiniteDuration()) {
      cv_.wait(held);
      return false;
    }
    return cv_.wait_for(held, absl::ToChronoNanoseconds(std::max(timeout, absl::ZeroDuration()))) ==
           std::cv_status::timeout;
  }
  // Wait until `deadline` at most (absl::InfiniteFuture(): no limit); true
  // when it has passed.
  bool WaitWithDeadline(Mutex* mutex, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    if (deadline == absl::InfiniteFuture()) {
      Wait(mutex);
      return false;
    }
    WaitWithTimeout(mutex, deadline - absl::Now());
    return absl::Now() >= deadline;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  // What std::condition_variable_any locks and unlocks: the Mutex already
  // held by the waiter, so the analysis (which cannot follow it) is off here.
  struct Adapter {
    Mutex* mutex;
    void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mutex->Lock(); }
    void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mutex->Unlock(); }
  };
  std::condition_variable_any cv_;
};

// A one-time event some threads wait for: Notify() once, then every wait
// returns at once.
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mutex_);
    notified_ = true;
    notified_cv_.SignalAll();
  }
  // True once notified; false when `timeout` passed first.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    MutexLock lock(&mutex_);
    while (!notified_ && !notified_cv_.WaitWithDeadline(&mutex_, deadline)) {
    }
    return notified_;
  }
  void WaitForNotification() { WaitForNotificationWithTimeout(absl::InfiniteDuration()); }
  bool HasBeenNotified() {
    MutexLock lock(&mutex_);
    return notified_;
  }

 private:
  Mutex mutex_;
  CondVar notified_cv_;
  bool notified_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_MUTEX_H_
