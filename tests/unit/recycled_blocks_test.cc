// RecycledBlocks: a freed block is handed out again by the same thread,
// at most kMaxKeptBlocks are kept, a block freed on another thread joins
// that thread's list, and a thread's kept blocks are deleted when it exits
// (LeakSanitizer would report them otherwise).
#include "client/src/recycled_blocks.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tensord {
namespace {

// Sizes of their own, so no other code of the process shares these lists.
using Blocks = RecycledBlocks<72, 8>;
using OtherBlocks = RecycledBlocks<88, 8>;

#define SKIP_WITHOUT_RECYCLING()                                            \
  if (!kRecyclesBlocks) {                                                   \
    GTEST_SKIP() << "AddressSanitizer builds return every block to malloc"; \
  }

TEST(RecycledBlocksTest, AFreedBlockIsHandedOutAgainLastFreedFirst) {
  SKIP_WITHOUT_RECYCLING();
  void* first = Blocks::Allocate();
  void* second = Blocks::Allocate();
  const size_t kept_before = Blocks::kept();
  Blocks::Free(first);
  Blocks::Free(second);
  EXPECT_EQ(Blocks::kept(), kept_before + 2);
  EXPECT_EQ(Blocks::Allocate(), second);
  EXPECT_EQ(Blocks::Allocate(), first);
  EXPECT_EQ(Blocks::kept(), kept_before);
  Blocks::Free(first);
  Blocks::Free(second);
}

TEST(RecycledBlocksTest, AThreadKeepsAtMostTheLimitAndDeletesTheRest) {
  SKIP_WITHOUT_RECYCLING();
  std::vector<void*> blocks;
  for (size_t i = 0; i < kMaxKeptBlocks + 100; ++i) blocks.push_back(Blocks::Allocate());
  for (void* block : blocks) Blocks::Free(block);
  EXPECT_EQ(Blocks::kept(), kMaxKeptBlocks);
}

TEST(RecycledBlocksTest, ABlockFreedOnAnotherThreadIsThatThreadsToReuse) {
  SKIP_WITHOUT_RECYCLING();
  void* block = OtherBlocks::Allocate();
  const size_t kept_here = OtherBlocks::kept();
  void* reused = nullptr;
  size_t kept_there = 0;
  std::thread other([&] {
    OtherBlocks::Free(block);
    kept_there = OtherBlocks::kept();
    reused = OtherBlocks::Allocate();
    OtherBlocks::Free(reused);  // kept until the thread exits, then deleted
  });
  other.join();
  EXPECT_EQ(kept_there, 1u);
  EXPECT_EQ(reused, block);
  EXPECT_EQ(OtherBlocks::kept(), kept_here);
}

struct Recycled {
  int64_t values[9] = {};
};

TEST(RecycledBlocksTest, ASharedObjectMadeWithTheAllocatorReusesTheBlockOfOneDropped) {
  SKIP_WITHOUT_RECYCLING();
  std::shared_ptr<Recycled> first = std::allocate_shared<Recycled>(RecyclingAllocator<Recycled>());
  const Recycled* const address = first.get();
  first.reset();
  std::shared_ptr<Recycled> second = std::allocate_shared<Recycled>(RecyclingAllocator<Recycled>());
  EXPECT_EQ(second.get(), address);
  // A vector's allocations of several objects are not recycled, only made.
  std::vector<Recycled, RecyclingAllocator<Recycled>> many(3);
  EXPECT_EQ(many.size(), 3u);
}

}  // namespace
}  // namespace tensord
