// BatchReceiveBlocks: a remote batch's small items are aligned, disjoint
// slices of pooled 1 MiB blocks; a block goes back to the pool with its
// last slice, and the next batch reuses it; large items get their own.
#include "client/src/batch_receive_blocks.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace tensord {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

uintptr_t Address(const std::shared_ptr<TensorMemory>& memory) {
  return reinterpret_cast<uintptr_t>(memory->data());
}

TEST(BatchReceiveBlocksTest, SmallItemsAreAlignedDisjointSlicesOfPooledBlocks) {
  std::shared_ptr<ReceiveBufferPool> pool = ReceiveBufferPool::Create(64 * kMiB);
  std::vector<std::shared_ptr<TensorMemory>> items;
  {
    BatchReceiveBlocks blocks(*pool);
    // 300 x 4 KiB spill into a second block; sizes that are not a multiple
    // of the alignment, and 0 bytes, still start aligned and are not null.
    for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{300}, uint64_t{65536}}) {
      absl::StatusOr<std::shared_ptr<TensorMemory>> memory = blocks.Allocate(size);
      ASSERT_TRUE(memory.ok()) << memory.status();
      items.push_back(*std::move(memory));
    }
    for (int i = 0; i < 300; ++i) {
      absl::StatusOr<std::shared_ptr<TensorMemory>> memory = blocks.Allocate(4096);
      ASSERT_TRUE(memory.ok()) << memory.status();
      std::memset((*memory)->data(), i & 0xff, 4096);
      items.push_back(*std::move(memory));
    }
  }
  for (const auto& item : items) {
    ASSERT_NE(item->data(), nullptr);
    EXPECT_EQ(Address(item) % BatchReceiveBlocks::kSliceAlignment, 0u);
    EXPECT_FALSE(item->read_only());
    EXPECT_TRUE(item->is_copy());
  }
  // Each 4 KiB item kept its own bytes: no two slices overlap.
  for (int i = 0; i < 300; ++i) {
    const auto* bytes = static_cast<const uint8_t*>(items[4 + i]->data());
    EXPECT_EQ(bytes[0], i & 0xff);
    EXPECT_EQ(bytes[4095], i & 0xff);
  }
  EXPECT_EQ(Address(items[5]) - Address(items[4]), 4096u);  // packed in one block
  EXPECT_EQ(pool->pooled_buffers(), 0u);                    // every block still held by its slices

  // The blocks go back to the pool with their last slices, and the next
  // batch reuses them instead of faulting new memory in.
  items.clear();
  EXPECT_EQ(pool->pooled_buffers(), 2u);
  BatchReceiveBlocks next(*pool);
  absl::StatusOr<std::shared_ptr<TensorMemory>> reused = next.Allocate(4096);
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_EQ(pool->reused(), 1u);
}

TEST(BatchReceiveBlocksTest, ItemsAboveTheSliceSizeGetMemoryOfTheirOwn) {
  std::shared_ptr<ReceiveBufferPool> pool = ReceiveBufferPool::Create(64 * kMiB);
  BatchReceiveBlocks blocks(*pool);
  absl::StatusOr<std::shared_ptr<TensorMemory>> small = blocks.Allocate(100);
  absl::StatusOr<std::shared_ptr<TensorMemory>> large =
      blocks.Allocate(BatchReceiveBlocks::kMaxSliceBytes + 1);
  absl::StatusOr<std::shared_ptr<TensorMemory>> after = blocks.Allocate(100);
  ASSERT_TRUE(small.ok() && large.ok() && after.ok());
  // The large item lies outside the block; the block goes on after it.
  const uintptr_t block_start = Address(*small);
  EXPECT_TRUE(Address(*large) < block_start ||
              Address(*large) >= block_start + BatchReceiveBlocks::kBlockBytes);
  EXPECT_EQ(Address(*after), block_start + BatchReceiveBlocks::kSliceAlignment);
}

}  // namespace
}  // namespace tensord
