// Per-thread reuse of the blocks of the client's per-tensor objects (a
// Tensor's context, a held version, its memory). A batch fetch makes, and
// a dropped batch frees, a thousand of each at once: more than malloc's
// per-thread cache keeps of one size (7), so each of those allocations and
// frees took malloc's slow path, a fifth of the client's instructions in a
// batch of small tensors. A thread keeps up to kMaxKeptBlocks freed blocks
// of each size and hands them out again; beyond that, and once the
// thread's exit has begun, blocks go back to malloc. A block freed on
// another thread than the one that allocated it joins the freeing thread's
// list: blocks are plain operator new memory, so any thread may reuse or
// delete them.
#ifndef TENSORD_CLIENT_SRC_RECYCLED_BLOCKS_H_
#define TENSORD_CLIENT_SRC_RECYCLED_BLOCKS_H_

#include <cstddef>
#include <new>

namespace tensord {

inline constexpr size_t kMaxKeptBlocks = 1024;

// AddressSanitizer builds hand every block back to malloc, so that a use
// after free of these objects is still reported.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRecyclesBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kRecyclesBlocks = false;
#else
inline constexpr bool kRecyclesBlocks = true;
#endif
#else
inline constexpr bool kRecyclesBlocks = true;
#endif

template <size_t kSize, size_t kAlign>
class RecycledBlocks {
 public:
  static_assert(kAlign <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned blocks are not kept");

  static void* Allocate() {
    FreeList& list = list_;
    if (list.head == nullptr) return ::operator new(kBlockSize);
    Node* node = list.head;
    list.head = node->next;
    --list.count;
    return node;
  }

  static void Free(void* block) {
    FreeList& list = list_;
    if (!kRecyclesBlocks || list.closed || list.count == kMaxKeptBlocks) {
      ::operator delete(block);
      return;
    }
    if (!list.closer_registered) {
      list.closer_registered = true;
      closer_.Register();  // empties the list when the thread exits
    }
    list.head = ::new (block) Node{list.head};
    ++list.count;
  }

  // Blocks this thread keeps now.
  static size_t kept() { return list_.count; }

 private:
  struct Node {
    Node* next;
  };
  static constexpr size_t kBlockSize = kSize < sizeof(Node) ? sizeof(Node) : kSize;

  // Trivially destructible, so still usable by objects freed after this
  // thread's closer ran (other thread-local destructors): they find it
  // closed and go back to malloc.
  struct FreeList {
    Node* head = nullptr;
    size_t count = 0;
    bool closed = false;
    bool closer_registered = false;
  };
  struct Closer {
    void Register() {}  // its first use constructs it, registering ~Closer
    ~Closer() {
      FreeList& list = list_;
      list.closed = true;
      while (list.head != nullptr) {
        Node* node = list.head;
        list.head = node->next;
        ::operator delete(node);
      }
      list.count = 0;
    }
  };

  static inline thread_local constinit FreeList list_{};
  static inline thread_local Closer closer_;
};

// An allocator for std::allocate_shared whose single-object allocations
// (the object with its control block) are recycled blocks.
template <class T>
struct RecyclingAllocator {
  using value_type = T;

  RecyclingAllocator() = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>& /*other*/) {}  // NOLINT: rebinding

  T* allocate(size_t count) {
    if (count != 1) return static_cast<T*>(::operator new(count * sizeof(T)));
    return static_cast<T*>(RecycledBlocks<sizeof(T), alignof(T)>::Allocate());
  }
  void deallocate(T* block, size_t count) {
    if (count != 1) {
      ::operator delete(block);
      return;
    }
    RecycledBlocks<sizeof(T), alignof(T)>::Free(block);
  }

  template <class U>
  bool operator==(const RecyclingAllocator<U>& /*other*/) const {
    return true;
  }
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_RECYCLED_BLOCKS_H_
