// The project's mutex: std::shared_mutex with Abseil's thread-safety
// annotations. Debian's Abseil is built without ThreadSanitizer hooks, so an
// absl::Mutex is invisible to TSan and every section it guards would be
// reported as a race; pthread-based locks are seen by TSan's interceptors.
#ifndef TENSORD_SERVICE_COMMON_MUTEX_H_
#define TENSORD_SERVICE_COMMON_MUTEX_H_

#include <shared_mutex>

#include "absl/base/thread_annotations.h"

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

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_MUTEX_H_
