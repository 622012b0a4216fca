// Human byte sizes: "8GiB", "512M", "4096" in flags; "1.5 GiB" in output.
#ifndef TENSORD_SERVICE_COMMON_BYTE_SIZE_H_
#define TENSORD_SERVICE_COMMON_BYTE_SIZE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace tensord {

// A number with an optional suffix: B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB
// (all binary: K = 1024), case-insensitive. INVALID_ARGUMENT names the text.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// "512 B", "4.0 KiB", "1.5 GiB".
std::string FormatByteSize(uint64_t bytes);

// What ParseByteSize reads back exactly: "8GiB" for a whole number of the
// largest binary unit that divides it, plain digits otherwise ("4097").
std::string FormatExactByteSize(uint64_t bytes);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_BYTE_SIZE_H_
