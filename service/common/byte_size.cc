#include "service/common/byte_size.h"
#include "absl/strings/string_view.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <utility>

namespace tensord {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < trimmed.size() && absl::ascii_isdigit(trimmed[digits])) ++digits;
  uint64_t number = 0;
  if (digits == 0 || !absl::SimpleAtoi(trimmed.substr(0, digits), &number)) {
    return absl::InvalidArgumentError(absl::StrCat("byte size '", text, "' is not a number"));
  }
  std::string suffix = absl::AsciiStrToLower(absl::StripAsciiWhitespace(trimmed.substr(digits)));
  int shift = -1;
  if (suffix.empty() || suffix == "b")
    shift = 0;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib")
    shift = 10;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib")
    shift = 20;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib")
    shift = 30;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib")
    shift = 40;
  if (shift < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size '", text, "' has unknown unit '", suffix, "'"));
  }
  if (shift > 0 && number > (UINT64_MAX >> shift)) {
    return absl::InvalidArgumentError(absl::StrCat("byte size '", text, "' overflows 64 bits"));
  }
  return number << shift;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatExactByteSize(uint64_t bytes) {
  static constexpr std::pair<int, const char*> kUnits[] = {
      {40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}};
  for (const auto& [shift, suffix] : kUnits) {
    const uint64_t unit = uint64_t{1} << shift;
    if (bytes != 0 && bytes % unit == 0) return absl::StrCat(bytes >> shift, suffix);
  }
  return absl::StrCat(bytes);
}

}  // namespace tensord
