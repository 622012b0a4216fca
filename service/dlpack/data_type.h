// The dtype table: which (code, bits, lanes) combinations tensord accepts,
// their names, and element sizes (including sub-byte packing).
#ifndef TENSORD_SERVICE_DLPACK_DATA_TYPE_H_
#define TENSORD_SERVICE_DLPACK_DATA_TYPE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/dlpack.h"

namespace tensord::dlpack {

// Most lanes a vector dtype may have.
inline constexpr uint16_t kMaxLanes = 64;

// OK when `code` is a known DLDataTypeCode, `bits` is a width that code allows
// (int/uint 8/16/32/64 and also 1/2/4 for packed sub-byte ints; float 16/32/64;
// bfloat 16; complex 64/128; bool 8; opaque handle 64; fp8 codes 8; fp6 codes
// 6; fp4 code 4) and 1 <= lanes <= kMaxLanes. Otherwise INVALID_ARGUMENT
// naming the offending value.
absl::Status ValidateDataType(DLDataType dtype);

// True when an element (bits * lanes) is not a whole number of bytes; such
// tensors are packed densely and must be compact.
bool IsSubByte(DLDataType dtype);

// Bits of one element: bits * lanes.
uint64_t ElementBits(DLDataType dtype);

// Bytes of one element for byte-addressable dtypes (bits * lanes / 8); 0 for
// sub-byte dtypes.
uint64_t ElementBytes(DLDataType dtype);

// Canonical name: "float32", "bfloat16", "bool", "int4", "float8_e4m3fn",
// "complex64", "uint8x4" (lanes > 1). Unknown codes render as "code9_bits8".
std::string DataTypeName(DLDataType dtype);

// Inverse of DataTypeName, plus common aliases ("f32", "float", "half",
// "f16", "bf16", "double", "i64", "u8", "b1"). INVALID_ARGUMENT names the text.
absl::StatusOr<DLDataType> ParseDataType(std::string_view text);

bool operator==(const DLDataType& a, const DLDataType& b);

}  // namespace tensord::dlpack

#endif  // TENSORD_SERVICE_DLPACK_DATA_TYPE_H_
