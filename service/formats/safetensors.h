// The .safetensors format: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and data_offsets, then the data.
// Parses untrusted input: every offset is checked against the file.
#ifndef TENSORD_SERVICE_FORMATS_SAFETENSORS_H_
#define TENSORD_SERVICE_FORMATS_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord::formats {

struct SafetensorsEntry {
  std::string name;
  dlpack::TensorLayout layout;  // compact row-major
  // Byte range of the tensor within the file (absolute offsets).
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsIndex {
  // In the order of increasing `begin`.
  std::vector<SafetensorsEntry> entries;
  // The optional "__metadata__" string map.
  std::map<std::string, std::string> metadata;
};

// Parses the header of a complete .safetensors file held in `file`. Dtypes:
// BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, C64,
// F8_E4M3 (float8_e4m3fn), F8_E5M2. Rejects with INVALID_ARGUMENT (naming the
// tensor and value): header length beyond the file or over 100 MB, invalid
// JSON, unknown dtype, negative or overflowing shape, data_offsets whose size
// differs from the dtype and shape, ranges outside the data section or
// overlapping one another, duplicate names.
absl::StatusOr<SafetensorsIndex> ParseSafetensors(std::string_view file);

}  // namespace tensord::formats

#endif  // TENSORD_SERVICE_FORMATS_SAFETENSORS_H_
