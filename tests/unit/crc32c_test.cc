#include "service/common/crc32c.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tensord {
namespace {

using crc32c_internal::Crc32cExtendHardware;
using crc32c_internal::Crc32cExtendPortable;
using crc32c_internal::Crc32cHardwareAvailable;

// Bit-at-a-time reference: slow, but obviously the definition.
uint32_t ReferenceCrc32c(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? 0x82F63B78u : 0u);
  }
  return ~c;
}

std::vector<unsigned char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// Lengths around every boundary the hardware loop has: 8-byte words and the
// 3 x 256 and 3 x 8192 interleaved blocks.
std::vector<size_t> InterestingLengths() {
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 80; ++n) lengths.push_back(n);
  for (size_t base : {256u, 768u, 1024u, 8192u, 24576u, 49152u, 65536u}) {
    for (size_t d = 0; d < 10; ++d) {
      lengths.push_back(base + d);
      if (base >= d) lengths.push_back(base - d);
    }
  }
  lengths.push_back(100003);
  lengths.push_back(1 << 20);
  return lengths;
}

TEST(Crc32cTest, KnownVectors) {
  const std::string digits = "123456789";
  EXPECT_EQ(Crc32c(digits.data(), digits.size()), 0xE3069283u);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);

  // RFC 3720 (iSCSI) appendix B.4.
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(down.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(Crc32cExtendPortable(0, digits.data(), digits.size()), 0xE3069283u);
}

TEST(Crc32cTest, PortableMatchesReference) {
  std::vector<unsigned char> data = RandomBytes(4096 + 8, 1);
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 65u, 1000u, 4096u}) {
    for (size_t align = 0; align < 8; ++align) {
      EXPECT_EQ(Crc32cExtendPortable(0, data.data() + align, n),
                ReferenceCrc32c(data.data() + align, n))
          << "n=" << n << " align=" << align;
    }
  }
}

TEST(Crc32cTest, HardwareMatchesPortable) {
  if (!Crc32cHardwareAvailable()) GTEST_SKIP() << "CPU has no SSE4.2";
  std::vector<size_t> lengths = InterestingLengths();
  std::vector<unsigned char> data = RandomBytes((1 << 20) + 16, 2);
  for (size_t n : lengths) {
    for (size_t align = 0; align < 8; ++align) {
      const unsigned char* p = data.data() + align;
      uint32_t seed = static_cast<uint32_t>(n * 2654435761u + align);
      ASSERT_EQ(Crc32cExtendHardware(0, p, n), Crc32cExtendPortable(0, p, n))
          << "n=" << n << " align=" << align;
      ASSERT_EQ(Crc32cExtendHardware(seed, p, n), Crc32cExtendPortable(seed, p, n))
          << "n=" << n << " align=" << align << " with a non-zero starting crc";
    }
  }
  EXPECT_EQ(Crc32cExtendHardware(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, DispatchMatchesPortable) {
  std::vector<unsigned char> data = RandomBytes(200000, 3);
  for (size_t n : {0u, 5u, 777u, 30000u, 200000u}) {
    EXPECT_EQ(Crc32c(data.data(), n), Crc32cExtendPortable(0, data.data(), n)) << "n=" << n;
  }
}

TEST(Crc32cTest, CombineOfTwoPartsIsTheWholesCrc) {
  std::vector<unsigned char> data = RandomBytes(70000, 6);
  const uint32_t whole = Crc32c(data.data(), data.size());
  std::mt19937 rng(7);
  for (size_t split : {size_t{0}, size_t{1}, size_t{4096}, data.size() - 1, data.size()}) {
    EXPECT_EQ(Crc32cCombine(Crc32c(data.data(), split),
                            Crc32c(data.data() + split, data.size() - split), data.size() - split),
              whole)
        << "split=" << split;
  }
  for (int trial = 0; trial < 100; ++trial) {
    // Three parts, combined left to right, as parallel ranges are.
    size_t first = rng() % (data.size() + 1);
    size_t second = first + rng() % (data.size() - first + 1);
    uint32_t crc = Crc32c(data.data(), first);
    crc = Crc32cCombine(crc, Crc32c(data.data() + first, second - first), second - first);
    crc = Crc32cCombine(crc, Crc32c(data.data() + second, data.size() - second),
                        data.size() - second);
    EXPECT_EQ(crc, whole) << first << " " << second;
  }
}

TEST(Crc32cTest, ExtendComposes) {
  std::vector<unsigned char> data = RandomBytes(60000, 4);
  const uint32_t whole = Crc32c(data.data(), data.size());
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    size_t split = rng() % (data.size() + 1);
    uint32_t first = Crc32c(data.data(), split);
    EXPECT_EQ(Crc32cExtend(first, data.data() + split, data.size() - split), whole)
        << "split=" << split;
    EXPECT_EQ(Crc32cExtendPortable(Crc32cExtendPortable(0, data.data(), split), data.data() + split,
                                   data.size() - split),
              whole);
  }
  // Many small pieces, as a streamed put would feed them.
  uint32_t crc = 0;
  for (size_t off = 0; off < data.size();) {
    size_t piece = std::min<size_t>(1 + rng() % 5000, data.size() - off);
    crc = Crc32cExtend(crc, data.data() + off, piece);
    off += piece;
  }
  EXPECT_EQ(crc, whole);
}

}  // namespace
}  // namespace tensord
