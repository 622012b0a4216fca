// Counts chunk slices gRPC still holds: a put returns only once it holds
// none, because they point into the caller's memory.
#ifndef TENSORD_CLIENT_SRC_SLICE_LATCH_H_
#define TENSORD_CLIENT_SRC_SLICE_LATCH_H_

#include "absl/base/thread_annotations.h"
#include "service/common/mutex.h"

namespace tensord {

class SliceLatch {
 public:
  SliceLatch() = default;
  SliceLatch(const SliceLatch&) = delete;
  SliceLatch& operator=(const SliceLatch&) = delete;
  // gRPC calls Release on the latch for every slice it still holds, so it
  // cannot go before them, whatever path (an exception included) leaves
  // the scope. Declare it before the ClientContexts of its calls: gRPC
  // gives back an ended call's slices only as its context is destroyed.
  ~SliceLatch() { Wait(); }

  void Add() {
    MutexLock lock(&mutex_);
    ++outstanding_;
  }
  // The release callback handed to MakeChunkBuffer with the latch.
  static void Release(void* latch) { static_cast<SliceLatch*>(latch)->Done(); }
  void Wait() {
    MutexLock lock(&mutex_);
    while (outstanding_ != 0) released_.Wait(&mutex_);
  }

 private:
  void Done() {
    MutexLock lock(&mutex_);
    if (--outstanding_ == 0) released_.SignalAll();
  }
  Mutex mutex_;
  CondVar released_;
  int outstanding_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_SLICE_LATCH_H_
