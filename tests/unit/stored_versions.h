// Stored versions for tests of the hand-written answers that describe them
// (TensorInfo's fields): a 1-d tensor of `dtype` covering `total_bytes`,
// with a checksum and a creation time that take several varint bytes.
#ifndef TENSORD_TESTS_UNIT_STORED_VERSIONS_H_
#define TENSORD_TESTS_UNIT_STORED_VERSIONS_H_

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "service/registry/tensor_version.h"

namespace tensord {

// Appended to `versions` (a TensorVersion does not move), numbered 8, 9, ...
inline TensorVersion& AddStoredVersion(std::deque<TensorVersion>& versions, std::string name,
                                       uint64_t total_bytes, DLDataType dtype) {
  TensorVersion& version = versions.emplace_back();
  version.name = std::move(name);
  version.version = 7 + versions.size();
  version.layout.dtype = dtype;
  version.layout.shape = {static_cast<int64_t>(total_bytes / (dtype.bits / 8))};
  version.total_bytes = total_bytes;
  version.crc32c = 0x89abcdef;
  version.created = absl::FromUnixNanos(1'700'000'000'123'456'789);
  return version;
}

}  // namespace tensord

#endif  // TENSORD_TESTS_UNIT_STORED_VERSIONS_H_
