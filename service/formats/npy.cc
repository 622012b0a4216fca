#include "service/formats/npy.h"
#include "absl/strings/string_view.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/common/absl_view.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"

namespace tensord::formats {
namespace {

constexpr std::string_view kMagic("\x93NUMPY", 6);
// numpy aligns the data start to 64 bytes so it can be mapped and used in place.
constexpr size_t kHeaderAlign = 64;
// Real headers are a few hundred bytes (kMaxDims extents at most); a larger
// one is corrupt or hostile, and refusing it bounds the parsing work.
constexpr uint64_t kMaxNpyHeaderBytes = uint64_t{1} << 20;

absl::Status HeaderError(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("npy header: ", AsAbsl(what)));
}

// A .npy descr without its byte-order character, and the dtype it names.
struct DescrEntry {
  std::string_view type;
  DLDataType dtype;
};

constexpr std::array<DescrEntry, 14> kDescrs = {{
    {"b1", {dlpack::kBool, 8, 1}},
    {"i1", {dlpack::kInt, 8, 1}},
    {"i2", {dlpack::kInt, 16, 1}},
    {"i4", {dlpack::kInt, 32, 1}},
    {"i8", {dlpack::kInt, 64, 1}},
    {"u1", {dlpack::kUInt, 8, 1}},
    {"u2", {dlpack::kUInt, 16, 1}},
    {"u4", {dlpack::kUInt, 32, 1}},
    {"u8", {dlpack::kUInt, 64, 1}},
    {"f2", {dlpack::kFloat, 16, 1}},
    {"f4", {dlpack::kFloat, 32, 1}},
    {"f8", {dlpack::kFloat, 64, 1}},
    {"c8", {dlpack::kComplex, 64, 1}},
    {"c16", {dlpack::kComplex, 128, 1}},
}};

absl::StatusOr<DLDataType> DescrToDataType(std::string_view descr) {
  char order = '=';  // numpy itself accepts a descr with no byte-order char
  std::string_view type = descr;
  if (!type.empty() && (type[0] == '<' || type[0] == '>' || type[0] == '|' || type[0] == '=')) {
    order = type[0];
    type.remove_prefix(1);
  }
  for (const DescrEntry& e : kDescrs) {
    if (e.type != type) continue;
    // Byte order is meaningless for one-byte types, so any marker is fine.
    if (order == '>' && e.dtype.bits > 8) {
      return HeaderError(absl::StrCat("big-endian descr '", absl::CHexEscape(AsAbsl(descr)),
                                      "' is not supported; save little-endian data"));
    }
    return e.dtype;
  }
  return HeaderError(absl::StrCat("unsupported descr '", absl::CHexEscape(AsAbsl(descr)),
                                  "' (expected bool, int, uint, float or complex, e.g. '<f4')"));
}

// A cursor over the header's Python dict literal. It accepts exactly the
// subset numpy writes: string keys, one string, one bool and one int tuple.
class DictParser {
 public:
  explicit DictParser(std::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
  }
  // Skips whitespace, then consumes `c` if it is next.
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

  absl::Status Error(std::string_view what) const {
    std::string_view near = text_.substr(pos_, 24);
    return HeaderError(absl::StrCat(AsAbsl(what), " at offset ", pos_, " of the dict, near '",
                                    absl::CHexEscape(AsAbsl(near)), "'"));
  }

  absl::StatusOr<std::string> ParseString() {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("expected a quoted string");
    }
    char quote = text_[pos_++];
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      // numpy never writes escapes in these strings; refusing them keeps the
      // parser simple and the accepted values exact.
      if (text_[pos_] == '\\') return Error("escape sequences are not supported");
      ++pos_;
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    std::string value(text_.substr(start, pos_ - start));
    ++pos_;
    return value;
  }

  absl::StatusOr<bool> ParseBool() {
    SkipSpace();
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    return Error("expected True or False");
  }

  // A tuple of non-negative ints: (), (5,), (2, 3) or (2, 3,).
  absl::StatusOr<std::vector<int64_t>> ParseShape() {
    if (!Consume('(')) return Error("expected a shape tuple");
    std::vector<int64_t> shape;
    if (Consume(')')) return shape;
    while (true) {
      TENSORD_ASSIGN_OR_RETURN(int64_t dim, ParseDim());
      if (shape.size() >= static_cast<size_t>(dlpack::kMaxDims)) {
        return Error(absl::StrCat("more than ", dlpack::kMaxDims, " dimensions"));
      }
      shape.push_back(dim);
      bool comma = Consume(',');
      if (Consume(')')) {
        // Python needs the comma to make (5,) a tuple rather than a number.
        if (shape.size() == 1 && !comma) return Error("one-element shape without a comma");
        return shape;
      }
      if (!comma) return Error("expected ',' or ')' in the shape tuple");
    }
  }

 private:
  static bool IsSpace(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
  }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  absl::StatusOr<int64_t> ParseDim() {
    SkipSpace();
    const size_t start = pos_;
    bool negative = false;
    if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) {
      negative = text_[pos_] == '-';
      ++pos_;
    }
    if (pos_ >= text_.size() || !IsDigit(text_[pos_])) return Error("expected an integer");
    uint64_t value = 0;
    constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
    while (pos_ < text_.size() && IsDigit(text_[pos_])) {
      uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (value > (kMax - digit) / 10) {
        pos_ = start;
        return Error("dimension does not fit in int64");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    // Files written by Python 2 numpy spell longs as 3L.
    if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
    if (negative && value != 0) {
      pos_ = start;
      return Error(absl::StrCat("negative dimension -", value));
    }
    return static_cast<int64_t>(value);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

struct DictFields {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

absl::StatusOr<DictFields> ParseDict(std::string_view text) {
  DictParser p(text);
  struct {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<int64_t>> shape;
  } fields;
  if (!p.Consume('{')) return p.Error("expected '{'");
  while (!p.Consume('}')) {
    TENSORD_ASSIGN_OR_RETURN(std::string key, p.ParseString());
    if (!p.Consume(':')) return p.Error(absl::StrCat("expected ':' after key '", key, "'"));
    auto duplicate = [&](bool seen) -> absl::Status {
      return seen ? p.Error(absl::StrCat("duplicate key '", key, "'")) : absl::OkStatus();
    };
    if (key == "descr") {
      TENSORD_RETURN_IF_ERROR(duplicate(fields.descr.has_value()));
      TENSORD_ASSIGN_OR_RETURN(fields.descr, p.ParseString());
    } else if (key == "fortran_order") {
      TENSORD_RETURN_IF_ERROR(duplicate(fields.fortran_order.has_value()));
      TENSORD_ASSIGN_OR_RETURN(fields.fortran_order, p.ParseBool());
    } else if (key == "shape") {
      TENSORD_RETURN_IF_ERROR(duplicate(fields.shape.has_value()));
      TENSORD_ASSIGN_OR_RETURN(fields.shape, p.ParseShape());
    } else {
      // numpy refuses extra keys too; they would mean a format we don't know.
      return p.Error(absl::StrCat("unexpected key '", absl::CHexEscape(key), "'"));
    }
    if (p.Consume(',')) continue;
    if (p.Consume('}')) break;
    return p.Error("expected ',' or '}'");
  }
  if (!p.AtEnd()) return p.Error("unexpected text after the dict");
  if (!fields.descr) return HeaderError("dict has no 'descr' key");
  if (!fields.fortran_order) return HeaderError("dict has no 'fortran_order' key");
  if (!fields.shape) return HeaderError("dict has no 'shape' key");
  return DictFields{std::move(*fields.descr), *fields.fortran_order, std::move(*fields.shape)};
}

// Column-major strides in elements. Extents of 0 count as 1, as in numpy, so
// a zero-size array still gets strides; overflow is refused.
absl::StatusOr<std::vector<int64_t>> FortranStrides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    strides[i] = stride;
    if (i + 1 < shape.size() &&
        __builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride)) {
      return HeaderError("Fortran-order strides overflow int64");
    }
  }
  return strides;
}

uint64_t LoadLe(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = v << 8 | static_cast<unsigned char>(bytes[i]);
  return v;
}

std::string ShapeTuple(std::span<const int64_t> shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

}  // namespace

absl::StatusOr<NpyHeader> ParseNpyHeader(std::string_view file, bool file_is_complete) {
  if (file.substr(0, kMagic.size()) != kMagic) {
    return HeaderError(absl::StrCat("bad magic '", absl::CHexEscape(AsAbsl(file.substr(0, 6))),
                                    "', expected '\\x93NUMPY'"));
  }
  if (file.size() < kMagic.size() + 2) {
    return HeaderError(absl::StrCat("input of ", file.size(), " bytes ends inside the preamble"));
  }
  const int major = static_cast<unsigned char>(file[6]);
  const int minor = static_cast<unsigned char>(file[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return HeaderError(absl::StrCat("unsupported format version ", major, ".", minor,
                                    " (expected 1.0, 2.0 or 3.0)"));
  }
  // Version 1.0 stores the dict length in 2 bytes; 2.0 and 3.0 use 4.
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagic.size() + 2 + length_bytes;
  if (file.size() < prefix) {
    return HeaderError(absl::StrCat("input of ", file.size(), " bytes ends inside the preamble"));
  }
  const uint64_t dict_bytes = LoadLe(file.substr(kMagic.size() + 2, length_bytes));
  if (dict_bytes > kMaxNpyHeaderBytes) {
    return HeaderError(
        absl::StrCat("header length ", dict_bytes, " exceeds the limit of ", kMaxNpyHeaderBytes));
  }
  if (dict_bytes > file.size() - prefix) {
    return HeaderError(absl::StrCat("header length ", dict_bytes, " runs past the end of the ",
                                    file.size(), "-byte input"));
  }
  TENSORD_ASSIGN_OR_RETURN(DictFields fields, ParseDict(file.substr(prefix, dict_bytes)));

  NpyHeader header;
  TENSORD_ASSIGN_OR_RETURN(header.layout.dtype, DescrToDataType(fields.descr));
  header.layout.shape = std::move(fields.shape);
  absl::StatusOr<uint64_t> bytes =
      dlpack::CompactByteSize(header.layout.dtype, header.layout.shape);
  if (!bytes.ok()) {
    // Our own prefix names the value whatever the dlpack message says.
    return HeaderError(
        absl::StrCat("shape ", ShapeTuple(header.layout.shape), ": ", bytes.status().message()));
  }
  if (fields.fortran_order) {
    TENSORD_ASSIGN_OR_RETURN(header.layout.strides, FortranStrides(header.layout.shape));
  }
  header.data_offset = prefix + dict_bytes;
  header.data_bytes = *bytes;
  if (file_is_complete) {
    uint64_t need;
    if (__builtin_add_overflow(header.data_offset, header.data_bytes, &need) ||
        need > file.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "npy file is truncated: it holds ", file.size(), " bytes but needs data_offset ",
          header.data_offset, " + data_bytes ", header.data_bytes));
    }
  }
  return header;
}

absl::StatusOr<std::string> EncodeNpyHeader(DLDataType dtype, std::span<const int64_t> shape) {
  const DescrEntry* entry = nullptr;
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype.code == dtype.code && e.dtype.bits == dtype.bits && e.dtype.lanes == dtype.lanes) {
      entry = &e;
    }
  }
  if (entry == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("npy cannot express dtype ", dlpack::DataTypeName(dtype)));
  }
  absl::StatusOr<uint64_t> bytes = dlpack::CompactByteSize(dtype, shape);
  if (!bytes.ok()) return bytes.status();

  // Keys in sorted order, as numpy writes them.
  std::string dict = absl::StrCat("{'descr': '", dtype.bits == 8 ? "|" : "<", AsAbsl(entry->type),
                                  "', 'fortran_order': False, 'shape': ", ShapeTuple(shape), ", }");
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned.
  auto padded = [&](size_t prefix) {
    size_t unpadded = prefix + dict.size() + 1;
    return dict.size() + 1 + (kHeaderAlign - unpadded % kHeaderAlign) % kHeaderAlign;
  };
  size_t prefix = kMagic.size() + 2 + 2;
  uint8_t major = 1;
  if (padded(prefix) > std::numeric_limits<uint16_t>::max()) {
    prefix += 2;
    major = 2;
  }
  const size_t length = padded(prefix);
  std::string out(kMagic);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  }
  out += dict;
  out.append(length - dict.size() - 1, ' ');
  out.push_back('\n');
  return out;
}

}  // namespace tensord::formats
