#include "service/wire/message_buffer_pool.h"

#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "service/common/mutex.h"

namespace tensord {
namespace {

// Each buffer starts with its size, so the slice's destroy callback, which
// gets only the buffer, knows where it goes back to. The bytes start one
// header on, aligned for any copy.
struct alignas(64) BufferHeader {
  size_t size;
};

class Pool {
 public:
  void* Take(size_t size) {
    {
      MutexLock lock(&mutex_);
      auto it = idle_.find(size);
      if (it != idle_.end() && !it->second.empty()) {
        void* buffer = it->second.back();
        it->second.pop_back();
        idle_bytes_ -= size;
        return buffer;
      }
    }
    const size_t bytes = (sizeof(BufferHeader) + size + alignof(BufferHeader) - 1) /
                         alignof(BufferHeader) * alignof(BufferHeader);
    void* buffer = std::aligned_alloc(alignof(BufferHeader), bytes);
    if (buffer == nullptr) std::abort();  // as gpr_malloc, behind grpc::Slice(size), does
    static_cast<BufferHeader*>(buffer)->size = size;
    return buffer;
  }

  void Return(void* buffer) {
    const size_t size = static_cast<BufferHeader*>(buffer)->size;
    {
      MutexLock lock(&mutex_);
      std::vector<void*>& idle = idle_[size];
      if (idle.size() < kMaxIdleMessageBuffers &&
          idle_bytes_ + size <= kMaxIdleMessageBufferBytes) {
        idle.push_back(buffer);
        idle_bytes_ += size;
        return;
      }
    }
    std::free(buffer);
  }

  size_t Idle(size_t size) {
    MutexLock lock(&mutex_);
    auto it = idle_.find(size);
    return it == idle_.end() ? 0 : it->second.size();
  }

 private:
  Mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> idle_ ABSL_GUARDED_BY(mutex_);
  size_t idle_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
};

// Never destroyed: slices may be dropped by gRPC's threads during exit.
Pool& ProcessPool() {
  static Pool* const pool = new Pool();
  return *pool;
}

void ReturnBuffer(void* buffer) { ProcessPool().Return(buffer); }

}  // namespace

grpc::Slice TakeMessageBuffer(size_t size) {
  void* buffer = ProcessPool().Take(size);
  return grpc::Slice(static_cast<char*>(buffer) + sizeof(BufferHeader), size, &ReturnBuffer,
                     buffer);
}

size_t IdleMessageBuffers(size_t size) { return ProcessPool().Idle(size); }

}  // namespace tensord
