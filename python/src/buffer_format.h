// The buffer protocol's struct-module format codes for DLPack dtypes, both
// ways (tensord.TensorWriter's buffer views, fetch_into into buffers).
#ifndef TENSORD_PYTHON_SRC_BUFFER_FORMAT_H_
#define TENSORD_PYTHON_SRC_BUFFER_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "tensord/dlpack.h"

namespace tensord::python {

// "f", "q", "?", "Zf", ...; nullptr for dtypes the struct module has no code
// for (bfloat16, fp8, sub-byte, lanes > 1).
const char* StructFormatOf(DLDataType dtype);

// What a buffer's `format` (with optional '@', '=' or '<' prefix; NULL means
// "B") and `itemsize` describe; an error message naming the format when it
// is big-endian or has no DLPack dtype.
struct ParsedFormat {
  std::optional<DLDataType> dtype;
  bool is_byte = false;  // 'B', 'b' or 'c': raw bytes are acceptable
  std::string error;
};
ParsedFormat ParseStructFormat(const char* format, int64_t itemsize);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_BUFFER_FORMAT_H_
