// ReceiveBufferPool: released fetch buffers are reused by a later Allocate
// that fits, within the pool's byte bound and idle time; small sizes and a
// pool of 0 bytes map new memory every time.
#include "client/src/receive_buffer_pool.h"

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tensord {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::shared_ptr<HeapTensorMemory> Take(ReceiveBufferPool& pool, uint64_t size) {
  absl::StatusOr<std::shared_ptr<HeapTensorMemory>> memory = pool.Allocate(size);
  EXPECT_TRUE(memory.ok()) << memory.status();
  if (!memory.ok()) return nullptr;
  // Every byte is written, as a fetch does.
  std::memset((*memory)->data(), 0x5a, size);
  return *std::move(memory);
}

TEST(ReceiveBufferPoolTest, AReleasedBufferServesTheNextAllocateOfASizeThatFits) {
  std::shared_ptr<ReceiveBufferPool> pool = ReceiveBufferPool::Create(64 * kMiB);
  std::shared_ptr<HeapTensorMemory> first = Take(*pool, 8 * kMiB);
  void* const address = first->data();
  first.reset();
  EXPECT_EQ(pool->pooled_bytes(), 8 * kMiB);
  std::shared_ptr<HeapTensorMemory> second = Take(*pool, 7 * kMiB);
  EXPECT_EQ(second->data(), address);
  EXPECT_EQ(second->size(), 7 * kMiB);
  EXPECT_EQ(pool->reused(), 1u);
  EXPECT_EQ(pool->pooled_bytes(), 0u);
}

TEST(ReceiveBufferPoolTest, AMuchLargerIdleBufferIsNotPinnedByASmallTensor) {
  std::shared_ptr<ReceiveBufferPool> pool = ReceiveBufferPool::Create(256 * kMiB);
  Take(*pool, 64 * kMiB).reset();
  std::shared_ptr<HeapTensorMemory> small = Take(*pool, 4 * kMiB);
  EXPECT_EQ(pool->reused(), 0u);
  EXPECT_EQ(pool->pooled_bytes(), 64 * kMiB);
}

TEST(ReceiveBufferPoolTest, ReleasesBeyondTheBoundUnmapTheLongestIdleFirst) {
  std::shared_ptr<ReceiveBufferPool> pool = ReceiveBufferPool::Create(12 * kMiB);
  std::vector<std::shared_ptr<HeapTensorMemory>> held;
  for (uint64_t mib : {4, 2, 8}) held.push_back(Take(*pool, mib * kMiB));
  for (auto& memory : held) {
    memory.reset();  // released in order: 4, 2, then 8 MiB (14 MiB over a 12 MiB bound)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(pool->pooled_bytes(), 10 * kMiB) << "the 4 MiB buffer, idle longest, went";
  EXPECT_EQ(pool->pooled_buffers(), 2u);
  // The newest release is kept even when it alone fills the bound.
  Take(*pool, 12 * kMiB).reset();
  EXPECT_EQ(pool->pooled_bytes(), 12 * kMiB);
  EXPECT_EQ(pool->pooled_buffers(), 1u);
  // A tensor larger than the whole bound is never pooled.
  Take(*pool, 16 * kMiB).reset();
  EXPECT_EQ(pool->pooled_bytes(), 12 * kMiB);
}

TEST(ReceiveBufferPoolTest, IdleBuffersAreUnmappedAfterTheIdleTime) {
  std::shared_ptr<ReceiveBufferPool> pool =
      ReceiveBufferPool::Create(64 * kMiB, absl::Milliseconds(1));
  Take(*pool, 4 * kMiB).reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::shared_ptr<HeapTensorMemory> later = Take(*pool, 4 * kMiB);
  EXPECT_EQ(pool->reused(), 0u);
  EXPECT_EQ(pool->pooled_buffers(), 0u);
}

TEST(ReceiveBufferPoolTest, SmallSizesAndAZeroBytePoolMapNewMemory) {
  std::shared_ptr<ReceiveBufferPool> pool = ReceiveBufferPool::Create(64 * kMiB);
  Take(*pool, 128 << 10).reset();  // below the mmap threshold: malloc's
  EXPECT_EQ(pool->pooled_buffers(), 0u);
  std::shared_ptr<ReceiveBufferPool> off = ReceiveBufferPool::Create(0);
  Take(*off, 8 * kMiB).reset();
  EXPECT_EQ(off->pooled_buffers(), 0u);
  EXPECT_EQ(off->reused(), 0u);
}

TEST(ReceiveBufferPoolTest, ATensorOutlivesThePoolHandleThatMadeIt) {
  std::shared_ptr<ReceiveBufferPool> pool = ReceiveBufferPool::Create(64 * kMiB);
  std::shared_ptr<HeapTensorMemory> kept = Take(*pool, 4 * kMiB);
  pool.reset();  // the client is gone; the tensor holds the pool
  static_cast<uint8_t*>(kept->data())[4 * kMiB - 1] = 1;
  kept.reset();  // back to the pool, which then unmaps everything
}

TEST(ReceiveBufferPoolTest, ConcurrentAllocatesAndReleasesKeepEveryBufferDistinct) {
  std::shared_ptr<ReceiveBufferPool> pool = ReceiveBufferPool::Create(32 * kMiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        absl::StatusOr<std::shared_ptr<HeapTensorMemory>> memory = pool->Allocate((2 + t) * kMiB);
        ASSERT_TRUE(memory.ok());
        // Another thread writing the same buffer would break this pattern.
        uint8_t* bytes = static_cast<uint8_t*>((*memory)->data());
        std::memset(bytes, t + 1, (*memory)->size());
        for (uint64_t at = 0; at < (*memory)->size(); at += 4096) ASSERT_EQ(bytes[at], t + 1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(pool->pooled_bytes(), 32 * kMiB);
}

}  // namespace
}  // namespace tensord
