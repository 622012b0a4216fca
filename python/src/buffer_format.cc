#include "python/src/buffer_format.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "service/dlpack/data_type.h"

namespace tensord::python {
namespace {

struct FormatName {
  const char* format;
  const char* dtype;
};

// Fixed-size codes only: the buffer protocol's native 'l'/'L' vary in size,
// so they are read through ParseStructFormat's itemsize instead.
constexpr FormatName kFormats[] = {
    {"?", "bool"},    {"b", "int8"},    {"B", "uint8"},      {"h", "int16"},       {"H", "uint16"},
    {"i", "int32"},   {"I", "uint32"},  {"q", "int64"},      {"Q", "uint64"},      {"e", "float16"},
    {"f", "float32"}, {"d", "float64"}, {"Zf", "complex64"}, {"Zd", "complex128"},
};

std::optional<DLDataType> Parsed(const std::string& name) {
  absl::StatusOr<DLDataType> dtype = dlpack::ParseDataType(name);
  if (!dtype.ok()) return std::nullopt;
  return *dtype;
}

}  // namespace

const char* StructFormatOf(DLDataType dtype) {
  const std::string name = dlpack::DataTypeName(dtype);
  for (const FormatName& entry : kFormats) {
    if (name == entry.dtype) return entry.format;
  }
  return nullptr;
}

ParsedFormat ParseStructFormat(const char* format, int64_t itemsize) {
  ParsedFormat parsed;
  std::string_view code = format == nullptr ? "B" : format;
  const std::string quoted = absl::StrCat("'", std::string(code), "'");
  if (!code.empty() && (code.front() == '>' || code.front() == '!')) {
    parsed.error =
        absl::StrCat("buffer format ", quoted, " is big-endian; tensord tensors are little-endian");
    return parsed;
  }
  if (!code.empty() && (code.front() == '@' || code.front() == '=' || code.front() == '<')) {
    code.remove_prefix(1);
  }
  const std::string bits = absl::StrCat(itemsize * 8);
  std::string name;
  if (code == "c" || code == "b" || code == "B") {
    parsed.is_byte = true;
    name = code == "B" ? "uint8" : "int8";
  } else if (code == "?") {
    name = "bool";
  } else if (code.size() == 1 &&
             std::string_view("hilqn").find(code[0]) != std::string_view::npos) {
    name = absl::StrCat("int", bits);  // the size the exporter says, native or standard
  } else if (code.size() == 1 &&
             std::string_view("HILQN").find(code[0]) != std::string_view::npos) {
    name = absl::StrCat("uint", bits);
  } else if (code == "e" || code == "f" || code == "d") {
    name = absl::StrCat("float", bits);
  } else if (code == "Zf" || code == "Zd") {
    name = absl::StrCat("complex", bits);
  }
  if (!name.empty()) parsed.dtype = Parsed(name);
  if (!parsed.dtype.has_value()) {
    parsed.error =
        absl::StrCat("buffer format ", quoted, " (itemsize ", itemsize,
                     ") has no tensord dtype; formats taken: ?, b, B, c, h, H, i, I, l, L, q, "
                     "Q, n, N, e, f, d, Zf, Zd");
  }
  return parsed;
}

}  // namespace tensord::python
