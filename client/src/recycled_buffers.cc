#include "client/src/recycled_buffers.h"

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "client/src/recycled_blocks.h"

namespace tensord {
namespace {

// Four 256-byte classes up to 1 KiB, then four per doubling up to 64 KiB.
constexpr size_t kSmallClasses = 4;
constexpr size_t kDoublings = 6;  // (1 KiB, 2 KiB] ... (32 KiB, 64 KiB]
constexpr size_t kClasses = kSmallClasses + 4 * kDoublings;

size_t RoundUp(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The class of a capacity that CapacityFor returned.
size_t ClassOf(size_t capacity) {
  if (capacity <= 1024) return capacity / 256 - 1;
  const size_t base = std::bit_floor(capacity - 1);  // capacity in (base, 2 * base]
  const size_t doubling = static_cast<size_t>(std::countr_zero(base)) - 10;
  return kSmallClasses + 4 * doubling + (capacity / (base / 4) - 5);
}

struct Node {
  Node* next;
  void* block;
};

// Trivially destructible, so still usable by buffers freed after this
// thread's closer ran (other thread-local destructors): they find it
// closed and go back to malloc.
struct FreeLists {
  Node* heads[kClasses] = {};
  size_t kept_bytes = 0;
  bool closed = false;
  bool closer_registered = false;
};

thread_local constinit FreeLists lists{};

struct Closer {
  void Register() {}  // its first use constructs it, registering ~Closer
  ~Closer() {
    lists.closed = true;
    for (Node*& head : lists.heads) {
      while (head != nullptr) {
        Node* node = head;
        head = node->next;
        std::free(node->block);
      }
    }
    lists.kept_bytes = 0;
  }
};

thread_local Closer closer;

}  // namespace

RecycledBuffer AlignedMalloc(size_t bytes) {
  void* block = std::malloc(bytes + kRecycledBufferAlignment - 1);
  if (block == nullptr) return {};
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(block) + kRecycledBufferAlignment - 1) &
                            ~uintptr_t{kRecycledBufferAlignment - 1};
  return {reinterpret_cast<void*>(aligned), block};
}

size_t RecycledBuffers::CapacityFor(size_t size) {
  if (size > kLargestRecycledBuffer) return 0;
  if (size <= 1024) return size <= 256 ? 256 : RoundUp(size, 256);
  const size_t base = std::bit_floor(size - 1);  // size in (base, 2 * base]
  return RoundUp(size, base / 4);
}

RecycledBuffer RecycledBuffers::Allocate(size_t size) {
  const size_t capacity = CapacityFor(size);
  Node*& head = lists.heads[ClassOf(capacity)];
  if (head != nullptr) {
    Node* node = head;
    head = node->next;
    lists.kept_bytes -= capacity;
    return {node, node->block};
  }
  return AlignedMalloc(capacity);
}

void RecycledBuffers::Free(RecycledBuffer buffer, size_t size) {
  const size_t capacity = CapacityFor(size);
  if (!kRecyclesBlocks || lists.closed || lists.kept_bytes + capacity > kMaxKeptBufferBytes) {
    std::free(buffer.block);
    return;
  }
  if (!lists.closer_registered) {
    lists.closer_registered = true;
    closer.Register();  // empties the lists when the thread exits
  }
  Node*& head = lists.heads[ClassOf(capacity)];
  head = ::new (buffer.data) Node{head, buffer.block};
  lists.kept_bytes += capacity;
}

size_t RecycledBuffers::kept_bytes() { return lists.kept_bytes; }

}  // namespace tensord
