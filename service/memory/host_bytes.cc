#include "service/memory/host_bytes.h"

#include "absl/strings/str_cat.h"

namespace tensord {

absl::StatusOr<uint64_t> HostBytes::CheckWrite(bool sealed, uint64_t size, uint64_t offset,
                                               std::span<const std::span<const uint8_t>> pieces) {
  if (sealed) return absl::FailedPreconditionError("write into a sealed buffer");
  uint64_t total = 0;
  for (std::span<const uint8_t> piece : pieces) total += piece.size();
  if (offset > size || total > size - offset) {
    return absl::OutOfRangeError(absl::StrCat("write of ", total, " bytes at offset ", offset,
                                              " leaves a buffer of ", size, " bytes"));
  }
  return total;
}

}  // namespace tensord
