// CRC-32C (Castagnoli), the checksum of stored tensor bytes.
#ifndef TENSORD_SERVICE_COMMON_CRC32C_H_
#define TENSORD_SERVICE_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace tensord {

// Extends `crc` (the CRC-32C of earlier bytes, 0 for none) with `size` bytes,
// so Crc32cExtend(Crc32cExtend(0, a), b) == CRC-32C of a followed by b. Uses
// the SSE4.2 crc32 instruction when the CPU has it.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

// The CRC-32C of A followed by B from the CRC-32Cs of A and of B and B's
// length, without the bytes: how ranges received in parallel are checked
// as one tensor. O(log length).
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

// The two implementations Crc32cExtend chooses between, exposed so tests can
// check that they agree. Crc32cExtendHardware may only be called when
// Crc32cHardwareAvailable() is true.
namespace crc32c_internal {
bool Crc32cHardwareAvailable();
uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, size_t size);
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);
}  // namespace crc32c_internal

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_CRC32C_H_
