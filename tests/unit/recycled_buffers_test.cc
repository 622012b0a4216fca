// RecycledBuffers: sizes round up to their class (never below the size,
// never more than a quarter above it past 1 KiB), buffers are 256-byte
// aligned and hold their whole capacity, a freed buffer is handed out again
// by the same thread for its class only, a thread keeps at most
// kMaxKeptBufferBytes, and a buffer freed on another thread joins that
// thread's lists (deleted when it exits: LeakSanitizer would report them).
#include "client/src/recycled_buffers.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "client/src/recycled_blocks.h"
#include "gtest/gtest.h"

namespace tensord {
namespace {

#define SKIP_WITHOUT_RECYCLING()                                             \
  if (!kRecyclesBlocks) {                                                    \
    GTEST_SKIP() << "AddressSanitizer builds return every buffer to malloc"; \
  }

TEST(RecycledBuffersTest, ASizeRoundsUpToItsClassAndNoFurther) {
  EXPECT_EQ(RecycledBuffers::CapacityFor(0), 256u);
  EXPECT_EQ(RecycledBuffers::CapacityFor(256), 256u);
  EXPECT_EQ(RecycledBuffers::CapacityFor(257), 512u);
  EXPECT_EQ(RecycledBuffers::CapacityFor(1024), 1024u);
  EXPECT_EQ(RecycledBuffers::CapacityFor(1025), 1280u);
  EXPECT_EQ(RecycledBuffers::CapacityFor(4096), 4096u);
  EXPECT_EQ(RecycledBuffers::CapacityFor(4097), 5120u);
  EXPECT_EQ(RecycledBuffers::CapacityFor(kLargestRecycledBuffer), kLargestRecycledBuffer);
  EXPECT_EQ(RecycledBuffers::CapacityFor(kLargestRecycledBuffer + 1), 0u);
  for (size_t size = 1; size <= kLargestRecycledBuffer; ++size) {
    const size_t capacity = RecycledBuffers::CapacityFor(size);
    ASSERT_GE(capacity, size);
    ASSERT_LT(capacity - size, std::max<size_t>(256, size / 4)) << size;
    ASSERT_EQ(capacity % 256, 0u) << size;
  }
}

TEST(RecycledBuffersTest, ABufferIsAlignedAndHoldsItsWholeCapacity) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{3000}, size_t{4096}, kLargestRecycledBuffer}) {
    const RecycledBuffer buffer = RecycledBuffers::Allocate(size);
    ASSERT_NE(buffer.data, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data) % kRecycledBufferAlignment, 0u);
    std::memset(buffer.data, 0xab, RecycledBuffers::CapacityFor(size));
    RecycledBuffers::Free(buffer, size);
  }
}

TEST(RecycledBuffersTest, AFreedBufferIsHandedOutAgainForItsClassOnly) {
  SKIP_WITHOUT_RECYCLING();
  const RecycledBuffer first = RecycledBuffers::Allocate(4096);
  const RecycledBuffer second = RecycledBuffers::Allocate(4000);  // the same class
  const size_t kept_before = RecycledBuffers::kept_bytes();
  RecycledBuffers::Free(first, 4096);
  RecycledBuffers::Free(second, 4000);
  EXPECT_EQ(RecycledBuffers::kept_bytes(), kept_before + 2 * 4096);
  const RecycledBuffer larger = RecycledBuffers::Allocate(4097);  // the next class up
  EXPECT_NE(larger.data, first.data);
  EXPECT_NE(larger.data, second.data);
  const RecycledBuffer again = RecycledBuffers::Allocate(3900);
  EXPECT_EQ(again.data, second.data);
  EXPECT_EQ(again.block, second.block);
  EXPECT_EQ(RecycledBuffers::Allocate(4096).data, first.data);
  EXPECT_EQ(RecycledBuffers::kept_bytes(), kept_before);
  RecycledBuffers::Free(larger, 4097);
  RecycledBuffers::Free(again, 3900);
  RecycledBuffers::Free(first, 4096);
}

TEST(RecycledBuffersTest, AThreadKeepsAtMostTheLimitAndFreesTheRest) {
  SKIP_WITHOUT_RECYCLING();
  std::vector<RecycledBuffer> buffers;
  const size_t count = kMaxKeptBufferBytes / kLargestRecycledBuffer + 10;
  for (size_t i = 0; i < count; ++i) {
    buffers.push_back(RecycledBuffers::Allocate(kLargestRecycledBuffer));
  }
  for (const RecycledBuffer& buffer : buffers) {
    RecycledBuffers::Free(buffer, kLargestRecycledBuffer);
  }
  EXPECT_LE(RecycledBuffers::kept_bytes(), kMaxKeptBufferBytes);
  EXPECT_GT(RecycledBuffers::kept_bytes(), kMaxKeptBufferBytes - kLargestRecycledBuffer);
}

TEST(RecycledBuffersTest, ABufferFreedOnAnotherThreadIsThatThreadsToReuse) {
  SKIP_WITHOUT_RECYCLING();
  const RecycledBuffer buffer = RecycledBuffers::Allocate(20000);
  const size_t kept_here = RecycledBuffers::kept_bytes();
  RecycledBuffer reused;
  size_t kept_there = 0;
  std::thread other([&] {
    RecycledBuffers::Free(buffer, 20000);
    kept_there = RecycledBuffers::kept_bytes();
    reused = RecycledBuffers::Allocate(20000);
    RecycledBuffers::Free(reused, 20000);  // kept until the thread exits, then freed
  });
  other.join();
  EXPECT_EQ(kept_there, RecycledBuffers::CapacityFor(20000));
  EXPECT_EQ(reused.data, buffer.data);
  EXPECT_EQ(RecycledBuffers::kept_bytes(), kept_here);
}

}  // namespace
}  // namespace tensord
