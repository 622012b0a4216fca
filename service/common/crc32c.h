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

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_CRC32C_H_
