// Per-thread reuse of the buffers that small fetched tensors are received
// into (up to 64 KiB). A remote batch of a thousand 4 KiB tensors allocates
// a thousand buffers, and dropping it frees them at once: malloc keeps a
// handful of each size in its per-thread cache, so nearly every one took
// its slow path (allocation, free and consolidation: a seventh of the
// client's time, perf). Sizes are rounded up to classes of four per
// doubling (at most a quarter of waste, as the server's arena slots), and a
// thread keeps at most kMaxKeptBufferBytes of freed buffers; beyond that,
// and once the thread's exit has begun, buffers go back to malloc. A buffer
// freed on another thread joins the freeing thread's lists: buffers are
// plain malloc memory, so any thread may reuse or free them.
#ifndef TENSORD_CLIENT_SRC_RECYCLED_BUFFERS_H_
#define TENSORD_CLIENT_SRC_RECYCLED_BUFFERS_H_

#include <cstddef>

namespace tensord {

inline constexpr size_t kRecycledBufferAlignment = 256;
inline constexpr size_t kLargestRecycledBuffer = size_t{64} << 10;
inline constexpr size_t kMaxKeptBufferBytes = size_t{4} << 20;

// `data`, 256-byte aligned, lies inside `block`, what malloc returned.
struct RecycledBuffer {
  void* data = nullptr;
  void* block = nullptr;
};

// `bytes` of malloc's memory with `data` aligned inside the block (glibc's
// aligned_alloc carves its block out of a larger chunk and frees the rest
// each time: 550 of the instructions of a 4 KiB fetch, callgrind); both
// pointers null when memory is exhausted. Released with free(block).
RecycledBuffer AlignedMalloc(size_t bytes);

class RecycledBuffers {
 public:
  // The bytes a buffer for `size` bytes holds: `size` rounded up to its
  // class (at least 256 bytes; at most a quarter above `size` beyond 1 KiB);
  // 0 above kLargestRecycledBuffer.
  static size_t CapacityFor(size_t size);

  // A buffer of CapacityFor(size) bytes (`size` at most
  // kLargestRecycledBuffer); both pointers null when memory is exhausted.
  static RecycledBuffer Allocate(size_t size);

  // Takes back a buffer that Allocate(size) returned, on any thread.
  static void Free(RecycledBuffer buffer, size_t size);

  // Bytes of freed buffers this thread keeps now.
  static size_t kept_bytes();
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_RECYCLED_BUFFERS_H_
