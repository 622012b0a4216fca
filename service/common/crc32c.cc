// CRC-32C: the SSE4.2 crc32 instruction on three interleaved streams when the
// CPU has it, slicing-by-8 tables otherwise. All tables are built at compile
// time, so there is no initialisation race and no startup cost.
#include "service/common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace tensord {
namespace {

// Reflected Castagnoli polynomial.
constexpr uint32_t kPoly = 0x82F63B78u;

// ---------------------------------------------------------------------------
// Portable path: slicing-by-8.

using SliceTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr SliceTables MakeSliceTables() {
  SliceTables t{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
    t[0][n] = c;
  }
  // t[k][n] is the CRC of byte n followed by k zero bytes.
  for (int k = 1; k < 8; ++k) {
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = t[k - 1][n];
      t[k][n] = (c >> 8) ^ t[0][c & 0xFFu];
    }
  }
  return t;
}

constexpr SliceTables kSlice = MakeSliceTables();

inline uint32_t LoadLe32(const unsigned char* p) {
  // Byte-wise assembly is endian-independent; compilers fold it to one load.
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint32_t ExtendPortable(uint32_t crc, const unsigned char* p, size_t n) {
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo = LoadLe32(p) ^ c;
    uint32_t hi = LoadLe32(p + 4);
    c = kSlice[7][lo & 0xFF] ^ kSlice[6][(lo >> 8) & 0xFF] ^ kSlice[5][(lo >> 16) & 0xFF] ^
        kSlice[4][lo >> 24] ^ kSlice[3][hi & 0xFF] ^ kSlice[2][(hi >> 8) & 0xFF] ^
        kSlice[1][(hi >> 16) & 0xFF] ^ kSlice[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kSlice[0][(c ^ *p++) & 0xFF];
  return ~c;
}

// ---------------------------------------------------------------------------
// Zero-extension operators. Three streams are CRC'd independently and then
// joined: crc(A || B) = shift(crc(A), |B|) ^ crc_from_zero(B), where shift
// feeds |B| zero bytes through the CRC register. The operator is a 32x32
// matrix over GF(2); we precompute it as four byte-indexed tables for the two
// fixed block sizes the hardware loop uses.

using Gf2Matrix = std::array<uint32_t, 32>;  // column n = image of bit n

constexpr uint32_t Gf2Times(const Gf2Matrix& m, uint32_t v) {
  uint32_t sum = 0;
  for (int n = 0; v != 0; ++n, v >>= 1) {
    if (v & 1u) sum ^= m[n];
  }
  return sum;
}

constexpr Gf2Matrix Gf2Square(const Gf2Matrix& m) {
  Gf2Matrix sq{};
  for (int n = 0; n < 32; ++n) sq[n] = Gf2Times(m, m[n]);
  return sq;
}

using ShiftTables = std::array<std::array<uint32_t, 256>, 4>;

// Tables applying `bytes` zero bytes (a power of two) to a CRC register.
constexpr ShiftTables MakeShiftTables(size_t bytes) {
  Gf2Matrix op{};
  op[0] = kPoly;  // one zero bit
  for (int n = 1; n < 32; ++n) op[n] = 1u << (n - 1);
  for (int i = 0; i < 3; ++i) op = Gf2Square(op);  // one zero byte
  for (size_t b = bytes; b > 1; b >>= 1) op = Gf2Square(op);
  ShiftTables t{};
  for (uint32_t n = 0; n < 256; ++n) {
    for (int k = 0; k < 4; ++k) t[k][n] = Gf2Times(op, n << (8 * k));
  }
  return t;
}

[[maybe_unused]] inline uint32_t Shift(const ShiftTables& t, uint32_t crc) {
  return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
}

// Block sizes per stream: long blocks amortise the combine; short blocks keep
// three streams busy on medium buffers. Both must be powers of two.
constexpr size_t kLongBlock = 8192;
constexpr size_t kShortBlock = 256;

#if defined(__x86_64__)
constexpr ShiftTables kShiftLong = MakeShiftTables(kLongBlock);
constexpr ShiftTables kShiftShort = MakeShiftTables(kShortBlock);

inline uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The running state of the hardware loop.
struct HwCursor {
  uint64_t crc;  // pre-conditioned (inverted) register
  const unsigned char* p;
  size_t n;
};

// One crc32 instruction has a latency of 3 cycles but a throughput of one per
// cycle, so three independent streams over adjacent blocks run about three
// times faster than one; the three CRCs are then joined with `shift`, the
// operator for `block` zero bytes. (A lambda here would not inherit the
// target attribute under GCC, hence a function.)
__attribute__((target("sse4.2"))) void ThreeStreams(HwCursor& c, size_t block,
                                                    const ShiftTables& shift) {
  while (c.n >= 3 * block) {
    uint64_t c0 = c.crc, c1 = 0, c2 = 0;
    const unsigned char* p = c.p;
    const unsigned char* end = p + block;
    do {
      c0 = _mm_crc32_u64(c0, Load64(p));
      c1 = _mm_crc32_u64(c1, Load64(p + block));
      c2 = _mm_crc32_u64(c2, Load64(p + 2 * block));
      p += 8;
    } while (p < end);
    c0 = Shift(shift, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    c.crc = Shift(shift, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c2);
    c.p += 3 * block;
    c.n -= 3 * block;
  }
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const unsigned char* p,
                                                          size_t n) {
  HwCursor c{~crc, p, n};
  // Byte steps up to 8-byte alignment, so the word loads below are aligned.
  for (; c.n > 0 && (reinterpret_cast<uintptr_t>(c.p) & 7) != 0; --c.n) {
    c.crc = _mm_crc32_u8(static_cast<uint32_t>(c.crc), *c.p++);
  }
  ThreeStreams(c, kLongBlock, kShiftLong);
  ThreeStreams(c, kShortBlock, kShiftShort);
  for (; c.n >= 8; c.n -= 8, c.p += 8) c.crc = _mm_crc32_u64(c.crc, Load64(c.p));
  for (; c.n > 0; --c.n) c.crc = _mm_crc32_u8(static_cast<uint32_t>(c.crc), *c.p++);
  return ~static_cast<uint32_t>(c.crc);
}
#endif  // __x86_64__

using ExtendFn = uint32_t (*)(uint32_t, const unsigned char*, size_t);

ExtendFn ChooseExtend() {
#if defined(__x86_64__)
  if (crc32c_internal::Crc32cHardwareAvailable()) return ExtendHardware;
#endif
  return ExtendPortable;
}

}  // namespace

namespace crc32c_internal {

bool Crc32cHardwareAvailable() {
#if defined(__x86_64__)
  // Needed when called before static constructors have run.
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, size_t size) {
#if defined(__x86_64__)
  return ExtendHardware(crc, static_cast<const unsigned char*>(data), size);
#else
  return ExtendPortable(crc, static_cast<const unsigned char*>(data), size);
#endif
}

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size) {
  return ExtendPortable(crc, static_cast<const unsigned char*>(data), size);
}

}  // namespace crc32c_internal

namespace {

// Polynomials over GF(2) modulo the (reflected) Castagnoli polynomial, bit
// 31 holding x^0. a * b mod P by shift-and-add.
uint32_t MultiplyModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if ((a & bit) != 0) product ^= b;
    b = (b & 1u) != 0 ? (b >> 1) ^ kPoly : b >> 1;  // b *= x
  }
  return product;
}

// x^(8 * bytes) mod P: appending `bytes` zero bytes multiplies a CRC by it.
uint32_t ShiftForBytes(uint64_t bytes) {
  uint32_t power = 1u << 31;   // x^0
  uint32_t square = 1u << 23;  // x^8: one byte
  for (; bytes != 0; bytes >>= 1) {
    if ((bytes & 1u) != 0) power = MultiplyModP(power, square);
    square = MultiplyModP(square, square);
  }
  return power;
}

}  // namespace

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  // The pre- and post-inversions of the two CRCs cancel in this sum.
  return MultiplyModP(ShiftForBytes(length_b), crc_a) ^ crc_b;
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  static const ExtendFn extend = ChooseExtend();
  return extend(crc, static_cast<const unsigned char*>(data), size);
}

}  // namespace tensord
