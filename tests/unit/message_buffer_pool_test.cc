// The batch streams' message buffers come back to the pool when the last
// slice of them goes, are reused by the next message of their size, and at
// most kMaxIdleMessageBuffers of a size, kMaxIdleMessageBufferBytes in all,
// are kept.
#include "service/wire/message_buffer_pool.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace tensord {
namespace {

// A size no other test uses, so the process-wide pool starts empty of it.
constexpr size_t kSize = (size_t{1} << 20) + 4321;

TEST(MessageBufferPoolTest, ABufferComesBackWithItsLastSliceAndIsReused) {
  ASSERT_EQ(IdleMessageBuffers(kSize), 0u);
  const uint8_t* first_address = nullptr;
  {
    grpc::Slice slice = TakeMessageBuffer(kSize);
    ASSERT_EQ(slice.size(), kSize);
    first_address = slice.begin();
    std::memset(const_cast<uint8_t*>(slice.begin()), 0x5a, kSize);
    grpc::Slice part = slice.sub(10, 100);  // what a message keeps of it
    slice = grpc::Slice();
    EXPECT_EQ(IdleMessageBuffers(kSize), 0u);  // still held by the part
    EXPECT_EQ(part.begin()[0], 0x5a);
  }
  EXPECT_EQ(IdleMessageBuffers(kSize), 1u);
  grpc::Slice again = TakeMessageBuffer(kSize);
  EXPECT_EQ(again.begin(), first_address);
  EXPECT_EQ(IdleMessageBuffers(kSize), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again.begin()) % 64, 0u);
}

TEST(MessageBufferPoolTest, AtMostTheBoundIsKeptIdle) {
  constexpr size_t kOtherSize = kSize + 1;
  {
    std::vector<grpc::Slice> slices;
    for (size_t i = 0; i < kMaxIdleMessageBuffers + 5; ++i) {
      slices.push_back(TakeMessageBuffer(kOtherSize));
    }
  }
  EXPECT_EQ(IdleMessageBuffers(kOtherSize), kMaxIdleMessageBuffers);
  // Over all sizes, at most kMaxIdleMessageBufferBytes stay idle.
  constexpr size_t kLarge = (size_t{12} << 20) + 7;
  {
    std::vector<grpc::Slice> slices;
    for (size_t i = 0; i < 4; ++i) slices.push_back(TakeMessageBuffer(kLarge));
  }
  EXPECT_LT(IdleMessageBuffers(kLarge), 3u);
}

}  // namespace
}  // namespace tensord
