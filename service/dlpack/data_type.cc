#include "service/dlpack/data_type.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tensord::dlpack {
namespace {

// One accepted (code, bits) pair and its canonical name. This table is the
// single source of truth: validation, naming and parsing all read it, so a
// new DLPack code is added in exactly one place.
struct NamedType {
  std::string_view name;
  uint8_t code;
  uint8_t bits;
};

constexpr NamedType kNamedTypes[] = {
    {"int8", kInt, 8},
    {"int16", kInt, 16},
    {"int32", kInt, 32},
    {"int64", kInt, 64},
    {"int1", kInt, 1},
    {"int2", kInt, 2},
    {"int4", kInt, 4},
    {"uint8", kUInt, 8},
    {"uint16", kUInt, 16},
    {"uint32", kUInt, 32},
    {"uint64", kUInt, 64},
    {"uint1", kUInt, 1},
    {"uint2", kUInt, 2},
    {"uint4", kUInt, 4},
    {"float16", kFloat, 16},
    {"float32", kFloat, 32},
    {"float64", kFloat, 64},
    {"opaque64", kOpaqueHandle, 64},
    {"bfloat16", kBfloat, 16},
    {"complex64", kComplex, 64},
    {"complex128", kComplex, 128},
    {"bool", kBool, 8},
    {"float8_e3m4", kFloat8_e3m4, 8},
    {"float8_e4m3", kFloat8_e4m3, 8},
    {"float8_e4m3b11fnuz", kFloat8_e4m3b11fnuz, 8},
    {"float8_e4m3fn", kFloat8_e4m3fn, 8},
    {"float8_e4m3fnuz", kFloat8_e4m3fnuz, 8},
    {"float8_e5m2", kFloat8_e5m2, 8},
    {"float8_e5m2fnuz", kFloat8_e5m2fnuz, 8},
    {"float8_e8m0fnu", kFloat8_e8m0fnu, 8},
    {"float6_e2m3fn", kFloat6_e2m3fn, 6},
    {"float6_e3m2fn", kFloat6_e3m2fn, 6},
    {"float4_e2m1fn", kFloat4_e2m1fn, 4},
};

// Spellings other libraries use (NumPy, PyTorch, short forms) for a
// canonical name.
struct Alias {
  std::string_view alias;
  std::string_view name;
};

constexpr Alias kAliases[] = {
    {"f16", "float16"},   {"half", "float16"},    {"f32", "float32"},     {"float", "float32"},
    {"f64", "float64"},   {"double", "float64"},  {"bf16", "bfloat16"},   {"i8", "int8"},
    {"i16", "int16"},     {"i32", "int32"},       {"i64", "int64"},       {"u8", "uint8"},
    {"u16", "uint16"},    {"u32", "uint32"},      {"u64", "uint64"},      {"b1", "bool"},
    {"c64", "complex64"}, {"c128", "complex128"}, {"handle", "opaque64"},
};

// Whether the table holds (code, bits), by index: ValidateDataType runs for
// every layout put, fetched or answered, and the scan below was a fifth of
// a small tensor's layout checks.
constexpr auto kKnownCodeBits = [] {
  std::array<std::array<bool, 256>, kMaxDataTypeCode + 1> known{};
  for (const NamedType& type : kNamedTypes) known[type.code][type.bits] = true;
  return known;
}();

const NamedType* FindByCodeBits(uint8_t code, uint8_t bits) {
  for (const NamedType& type : kNamedTypes) {
    if (type.code == code && type.bits == bits) return &type;
  }
  return nullptr;
}

const NamedType* FindByName(std::string_view name) {
  for (const Alias& alias : kAliases) {
    if (alias.alias == name) {
      name = alias.name;
      break;
    }
  }
  for (const NamedType& type : kNamedTypes) {
    if (type.name == name) return &type;
  }
  return nullptr;
}

// The family a code belongs to, as error messages name it.
std::string CodeFamily(uint8_t code) {
  switch (code) {
    case kInt: return "int";
    case kUInt: return "uint";
    case kFloat: return "float";
    case kOpaqueHandle: return "opaque handle";
    case kBfloat: return "bfloat";
    case kComplex: return "complex";
    case kBool: return "bool";
    default: break;
  }
  // The fp8/fp6/fp4 codes each name a single format.
  for (const NamedType& type : kNamedTypes) {
    if (type.code == code) return std::string(type.name);
  }
  return absl::StrCat("code ", code);
}

// "16, 32, 64": the widths the table allows for `code`, in table order.
std::string AllowedBits(uint8_t code) {
  std::string out;
  for (const NamedType& type : kNamedTypes) {
    if (type.code != code) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", type.bits);
  }
  return out;
}

// Debian's Abseil is built with its own absl::string_view, distinct from
// std::string_view, so the headers' std::string_view is bridged here.
absl::string_view ToAbsl(std::string_view text) { return {text.data(), text.size()}; }

bool IsAllDigits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

absl::Status ValidateDataType(DLDataType dtype) {
  if (dtype.code > kMaxDataTypeCode) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype code ", dtype.code, " is not a DLPack type code"));
  }
  if (!kKnownCodeBits[dtype.code][dtype.bits]) {
    return absl::InvalidArgumentError(absl::StrCat(CodeFamily(dtype.code), " bits ", dtype.bits,
                                                   " is not one of ", AllowedBits(dtype.code)));
  }
  if (dtype.lanes < 1 || dtype.lanes > kMaxLanes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype lanes ", dtype.lanes, " is not in [1, ", kMaxLanes, "]"));
  }
  return absl::OkStatus();
}

bool IsSubByte(DLDataType dtype) { return ElementBits(dtype) % 8 != 0; }

uint64_t ElementBits(DLDataType dtype) {
  return static_cast<uint64_t>(dtype.bits) * static_cast<uint64_t>(dtype.lanes);
}

uint64_t ElementBytes(DLDataType dtype) { return IsSubByte(dtype) ? 0 : ElementBits(dtype) / 8; }

std::string DataTypeName(DLDataType dtype) {
  const NamedType* type = FindByCodeBits(dtype.code, dtype.bits);
  std::string name = type != nullptr ? std::string(type->name)
                                     : absl::StrCat("code", dtype.code, "_bits", dtype.bits);
  // Any lane count but 1 is spelled out, so that an invalid 0 never reads as
  // a valid scalar type.
  if (dtype.lanes != 1) absl::StrAppend(&name, "x", dtype.lanes);
  return name;
}

absl::StatusOr<DLDataType> ParseDataType(std::string_view text) {
  const std::string lowered = absl::AsciiStrToLower(ToAbsl(text));
  std::string_view base = lowered;
  uint32_t lanes = 1;
  const NamedType* type = FindByName(base);
  if (type == nullptr) {
    // "uint8x4": a known name followed by a lane count.
    const size_t x = base.rfind('x');
    if (x != std::string_view::npos && IsAllDigits(base.substr(x + 1))) {
      type = FindByName(base.substr(0, x));
      if (type != nullptr && !absl::SimpleAtoi(ToAbsl(base.substr(x + 1)), &lanes)) {
        lanes = UINT32_MAX;  // Too many digits: reported as out of range below.
      }
    }
  }
  if (type == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype '", ToAbsl(text), "' is not a known type name"));
  }
  if (lanes < 1 || lanes > kMaxLanes) {
    return absl::InvalidArgumentError(absl::StrCat("dtype '", ToAbsl(text), "': lanes ", lanes,
                                                   " is not in [1, ", kMaxLanes, "]"));
  }
  return DLDataType{type->code, type->bits, static_cast<uint16_t>(lanes)};
}

bool operator==(const DLDataType& a, const DLDataType& b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

}  // namespace tensord::dlpack
