#include "service/common/byte_size.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace tensord {
namespace {

TEST(FormatExactByteSizeTest, UsesTheLargestUnitThatDividesExactly) {
  EXPECT_EQ(FormatExactByteSize(0), "0");
  EXPECT_EQ(FormatExactByteSize(4097), "4097");
  EXPECT_EQ(FormatExactByteSize(4096), "4KiB");
  EXPECT_EQ(FormatExactByteSize(uint64_t{1} << 20), "1MiB");
  EXPECT_EQ(FormatExactByteSize(uint64_t{8} << 30), "8GiB");
  EXPECT_EQ(FormatExactByteSize(uint64_t{3} << 40), "3TiB");
  EXPECT_EQ(FormatExactByteSize((uint64_t{1} << 30) + (uint64_t{1} << 20)), "1025MiB");
}

TEST(FormatExactByteSizeTest, ParsesBackToTheSameValue) {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{1023}, uint64_t{1} << 10,
                         uint64_t{1536} << 10, uint64_t{8} << 30, UINT64_MAX, uint64_t{1} << 63}) {
    absl::StatusOr<uint64_t> parsed = ParseByteSize(FormatExactByteSize(bytes));
    ASSERT_TRUE(parsed.ok()) << bytes << ": " << parsed.status();
    EXPECT_EQ(*parsed, bytes);
  }
}

}  // namespace
}  // namespace tensord
