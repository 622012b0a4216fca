// The NumPy .npy format (versions 1.0, 2.0 and 3.0): header parsing and
// writing. Parses untrusted input: every size is checked.
#ifndef TENSORD_SERVICE_FORMATS_NPY_H_
#define TENSORD_SERVICE_FORMATS_NPY_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord::formats {

struct NpyHeader {
  // Compact row-major for C order; Fortran order gets column-major strides.
  dlpack::TensorLayout layout;
  // Offset of the array bytes from the start of the file.
  uint64_t data_offset = 0;
  // Bytes of array data that follow the header.
  uint64_t data_bytes = 0;
};

// Parses the header at the start of `file` (the whole file's bytes, or at
// least its header). Supports little-endian (or byte-order-free) bool, int8..
// int64, uint8..uint64, float16/32/64, complex64/128 descrs ('<f4', '|b1',
// '<c8', ...). INVALID_ARGUMENT names what is wrong: magic, version, a
// malformed dict, an unsupported or big-endian descr, a bad shape, or a file
// shorter than header + data (when `file` is the whole file, i.e.
// `file_is_complete`).
absl::StatusOr<NpyHeader> ParseNpyHeader(std::string_view file, bool file_is_complete = true);

// The header bytes (magic, version, padded dict) for a C-order array of
// `dtype` and `shape`; the data follows directly. Version 1.0 when the dict
// fits, 2.0 otherwise. INVALID_ARGUMENT for a dtype .npy cannot express
// (bfloat16, fp8/fp6/fp4, sub-byte ints, lanes > 1).
absl::StatusOr<std::string> EncodeNpyHeader(DLDataType dtype, std::span<const int64_t> shape);

}  // namespace tensord::formats

#endif  // TENSORD_SERVICE_FORMATS_NPY_H_
