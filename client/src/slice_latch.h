// Counts chunk slices gRPC still holds: a put returns only once it holds
// none, because they point into the caller's memory.
#ifndef TENSORD_CLIENT_SRC_SLICE_LATCH_H_
#define TENSORD_CLIENT_SRC_SLICE_LATCH_H_

#include <condition_variable>
#include <mutex>

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
    std::lock_guard<std::mutex> lock(mutex_);
    ++outstanding_;
  }
  // The release callback handed to MakeChunkBuffer with the latch.
  static void Release(void* latch) { static_cast<SliceLatch*>(latch)->Done(); }
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    released_.wait(lock, [this] { return outstanding_ == 0; });
  }

 private:
  void Done() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--outstanding_ == 0) released_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable released_;
  int outstanding_ = 0;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_SLICE_LATCH_H_
