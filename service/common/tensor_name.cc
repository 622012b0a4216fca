#include "service/common/tensor_name.h"
#include "absl/strings/string_view.h"

#include <array>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tensord {
namespace {

constexpr bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '/' || c == '-';
}

std::string Quoted(absl::string_view text) {
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, 300)), text.size() > 300 ? "...'" : "'");
}

absl::Status ValidateCharsAndLength(absl::string_view text, absl::string_view what) {
  if (text.size() > kMaxTensorNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", Quoted(text), " is ", text.size(),
                                                   " bytes; the limit is ", kMaxTensorNameBytes));
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (!IsNameChar(text[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", Quoted(text), " has character ", Quoted(text.substr(i, 1)),
                       " at byte ", i, "; allowed are letters, digits and _ . : / -"));
    }
  }
  return absl::OkStatus();
}

// Whether `name` obeys every rule, in one pass over a table: every call
// validates its name, on the client and again on the server, and the
// checks below, run one after another, cost three times as much. The
// checks below still run for a name this refuses, to say why.
// A byte's class: most are plain, so the loop takes one load and one
// branch for them (a table of allowed bytes, then a test for '/', took two
// branches a byte: 330 instructions for a 28-byte name).
enum NameByteClass : uint8_t { kRefused = 0, kPlain = 1, kSlash = 2 };
constexpr std::array<uint8_t, 256> kNameByteClass = [] {
  std::array<uint8_t, 256> table{};
  for (int c = 0; c < 256; ++c) {
    const char byte = static_cast<char>(c);
    table[c] = byte == '/' ? kSlash : IsNameChar(byte) ? kPlain : kRefused;
  }
  return table;
}();

bool IsBadSegment(const unsigned char* segment, size_t size) {
  return size == 0 || (segment[0] == '.' && (size == 1 || (size == 2 && segment[1] == '.')));
}

bool IsValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxTensorNameBytes || name.front() == '/') return false;
  const auto* at = reinterpret_cast<const unsigned char*>(name.data());
  const auto* const end = at + name.size();
  const unsigned char* segment = at;
  for (; at != end; ++at) {
    const uint8_t byte_class = kNameByteClass[*at];
    if (byte_class == kPlain) [[likely]] {
      continue;
    }
    if (byte_class == kRefused) return false;
    if (IsBadSegment(segment, static_cast<size_t>(at - segment))) return false;
    segment = at + 1;
  }
  return !IsBadSegment(segment, static_cast<size_t>(end - segment));
}

}  // namespace

absl::Status ValidateTensorName(absl::string_view name) {
  if (IsValidName(name)) return absl::OkStatus();
  if (name.empty()) return absl::InvalidArgumentError("tensor name is empty");
  if (absl::Status status = ValidateCharsAndLength(name, "tensor name"); !status.ok()) {
    return status;
  }
  if (name.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor name ", Quoted(name), " starts with '/'"));
  }
  for (size_t start = 0;;) {
    const size_t end = name.find('/', start);
    const absl::string_view segment =
        name.substr(start, end == absl::string_view::npos ? absl::string_view::npos : end - start);
    if (segment.empty() || segment == "." || segment == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor name ", Quoted(name), " has an empty, '.' or '..' path segment"));
    }
    if (end == absl::string_view::npos) return absl::OkStatus();
    start = end + 1;
  }
}

absl::Status ValidateNamePrefix(absl::string_view prefix) {
  return ValidateCharsAndLength(prefix, "name prefix");
}

}  // namespace tensord
