#include "service/dlpack/data_type.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tensord::dlpack {
namespace {

using ::testing::HasSubstr;

struct Expected {
  DLDataType dtype;
  const char* name;
  uint64_t element_bits;
};

// Every (code, bits) pair DLPack 1.1 defines, with the name tensord gives it.
const std::vector<Expected>& AllTypes() {
  static const auto* types = new std::vector<Expected>{
      {{kInt, 8, 1}, "int8", 8},
      {{kInt, 16, 1}, "int16", 16},
      {{kInt, 32, 1}, "int32", 32},
      {{kInt, 64, 1}, "int64", 64},
      {{kInt, 1, 1}, "int1", 1},
      {{kInt, 2, 1}, "int2", 2},
      {{kInt, 4, 1}, "int4", 4},
      {{kUInt, 8, 1}, "uint8", 8},
      {{kUInt, 16, 1}, "uint16", 16},
      {{kUInt, 32, 1}, "uint32", 32},
      {{kUInt, 64, 1}, "uint64", 64},
      {{kUInt, 1, 1}, "uint1", 1},
      {{kUInt, 2, 1}, "uint2", 2},
      {{kUInt, 4, 1}, "uint4", 4},
      {{kFloat, 16, 1}, "float16", 16},
      {{kFloat, 32, 1}, "float32", 32},
      {{kFloat, 64, 1}, "float64", 64},
      {{kBfloat, 16, 1}, "bfloat16", 16},
      {{kComplex, 64, 1}, "complex64", 64},
      {{kComplex, 128, 1}, "complex128", 128},
      {{kBool, 8, 1}, "bool", 8},
      {{kOpaqueHandle, 64, 1}, "opaque64", 64},
      {{kFloat8_e3m4, 8, 1}, "float8_e3m4", 8},
      {{kFloat8_e4m3, 8, 1}, "float8_e4m3", 8},
      {{kFloat8_e4m3b11fnuz, 8, 1}, "float8_e4m3b11fnuz", 8},
      {{kFloat8_e4m3fn, 8, 1}, "float8_e4m3fn", 8},
      {{kFloat8_e4m3fnuz, 8, 1}, "float8_e4m3fnuz", 8},
      {{kFloat8_e5m2, 8, 1}, "float8_e5m2", 8},
      {{kFloat8_e5m2fnuz, 8, 1}, "float8_e5m2fnuz", 8},
      {{kFloat8_e8m0fnu, 8, 1}, "float8_e8m0fnu", 8},
      {{kFloat6_e2m3fn, 6, 1}, "float6_e2m3fn", 6},
      {{kFloat6_e3m2fn, 6, 1}, "float6_e3m2fn", 6},
      {{kFloat4_e2m1fn, 4, 1}, "float4_e2m1fn", 4},
  };
  return *types;
}

TEST(DataTypeTest, EveryTableTypeIsValidAndNamed) {
  for (const Expected& e : AllTypes()) {
    EXPECT_TRUE(ValidateDataType(e.dtype).ok()) << e.name;
    EXPECT_EQ(DataTypeName(e.dtype), e.name);
    EXPECT_EQ(ElementBits(e.dtype), e.element_bits) << e.name;
  }
}

TEST(DataTypeTest, EveryCodeUpToFloat4IsCovered) {
  for (int code = 0; code <= kMaxDataTypeCode; ++code) {
    bool found = false;
    for (const Expected& e : AllTypes()) found = found || e.dtype.code == code;
    EXPECT_TRUE(found) << "code " << code;
  }
}

TEST(DataTypeTest, EveryNameRoundTrips) {
  for (const Expected& e : AllTypes()) {
    for (uint16_t lanes : {1, 2, 4, 64}) {
      DLDataType dtype = e.dtype;
      dtype.lanes = lanes;
      const std::string name = DataTypeName(dtype);
      auto parsed = ParseDataType(name);
      ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
      EXPECT_TRUE(*parsed == dtype) << name;
    }
  }
}

TEST(DataTypeTest, LanesAppendSuffix) {
  EXPECT_EQ(DataTypeName({kUInt, 8, 4}), "uint8x4");
  EXPECT_EQ(DataTypeName({kFloat, 32, 2}), "float32x2");
  EXPECT_EQ(ElementBits({kFloat, 32, 4}), 128u);
  EXPECT_EQ(ElementBytes({kFloat, 32, 4}), 16u);
}

TEST(DataTypeTest, UnknownRendersAsCodeAndBits) {
  EXPECT_EQ(DataTypeName({9, 16, 1}), "code9_bits16");
  EXPECT_EQ(DataTypeName({42, 8, 1}), "code42_bits8");
  EXPECT_EQ(DataTypeName({42, 8, 3}), "code42_bits8x3");
  // A zero lane count is spelled out rather than looking like a scalar.
  EXPECT_EQ(DataTypeName({kFloat, 32, 0}), "float32x0");
}

TEST(DataTypeTest, AliasesParse) {
  struct Alias {
    const char* text;
    DLDataType dtype;
  };
  const Alias aliases[] = {
      {"f32", {kFloat, 32, 1}},   {"float", {kFloat, 32, 1}},
      {"half", {kFloat, 16, 1}},  {"f16", {kFloat, 16, 1}},
      {"bf16", {kBfloat, 16, 1}}, {"double", {kFloat, 64, 1}},
      {"i64", {kInt, 64, 1}},     {"u8", {kUInt, 8, 1}},
      {"b1", {kBool, 8, 1}},      {"handle", {kOpaqueHandle, 64, 1}},
      {"F32", {kFloat, 32, 1}},   {"BFloat16", {kBfloat, 16, 1}},
      {"f32x4", {kFloat, 32, 4}},
  };
  for (const Alias& a : aliases) {
    auto parsed = ParseDataType(a.text);
    ASSERT_TRUE(parsed.ok()) << a.text << ": " << parsed.status();
    EXPECT_TRUE(*parsed == a.dtype) << a.text;
  }
}

TEST(DataTypeTest, ParseRejectsUnknownNamesAndBadLanes) {
  for (const char* text :
       {"", "float31", "int3", "x4", "float32x", "float32y4", "complex", "float8", "float32x0",
        "float32x65", "float32x99999999999999999999", "float32x-1", " float32"}) {
    auto parsed = ParseDataType(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  EXPECT_THAT(ParseDataType("float31").status().message(), HasSubstr("'float31'"));
  EXPECT_THAT(ParseDataType("float32x65").status().message(), HasSubstr("lanes 65"));
}

TEST(DataTypeTest, RejectsUnknownCode) {
  absl::Status status = ValidateDataType({42, 8, 1});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "dtype code 42 is not a DLPack type code");
  EXPECT_FALSE(ValidateDataType({kMaxDataTypeCode + 1, 8, 1}).ok());
}

TEST(DataTypeTest, RejectsBitsNamingAllowedWidths) {
  absl::Status status = ValidateDataType({kFloat, 8, 1});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "float bits 8 is not one of 16, 32, 64");
  EXPECT_THAT(ValidateDataType({kBfloat, 32, 1}).message(), HasSubstr("bfloat bits 32"));
  EXPECT_THAT(ValidateDataType({kComplex, 32, 1}).message(), HasSubstr("one of 64, 128"));
  EXPECT_THAT(ValidateDataType({kBool, 1, 1}).message(), HasSubstr("bool bits 1"));
  EXPECT_THAT(ValidateDataType({kOpaqueHandle, 32, 1}).message(), HasSubstr("opaque"));
  EXPECT_THAT(ValidateDataType({kFloat8_e4m3fn, 16, 1}).message(),
              HasSubstr("float8_e4m3fn bits 16 is not one of 8"));
  EXPECT_THAT(ValidateDataType({kFloat6_e2m3fn, 8, 1}).message(), HasSubstr("one of 6"));
  EXPECT_THAT(ValidateDataType({kFloat4_e2m1fn, 8, 1}).message(), HasSubstr("one of 4"));
  EXPECT_FALSE(ValidateDataType({kInt, 3, 1}).ok());
  EXPECT_FALSE(ValidateDataType({kUInt, 0, 1}).ok());
}

TEST(DataTypeTest, RejectsLanesOutOfRange) {
  EXPECT_EQ(ValidateDataType({kFloat, 32, 0}).message(), "dtype lanes 0 is not in [1, 64]");
  EXPECT_THAT(ValidateDataType({kFloat, 32, 65}).message(), HasSubstr("lanes 65"));
  EXPECT_TRUE(ValidateDataType({kFloat, 32, kMaxLanes}).ok());
}

TEST(DataTypeTest, SubByteDetection) {
  EXPECT_TRUE(IsSubByte({kInt, 4, 1}));
  EXPECT_TRUE(IsSubByte({kUInt, 1, 1}));
  EXPECT_TRUE(IsSubByte({kFloat4_e2m1fn, 4, 1}));
  EXPECT_TRUE(IsSubByte({kFloat6_e3m2fn, 6, 1}));
  EXPECT_TRUE(IsSubByte({kInt, 4, 3}));             // 12 bits.
  EXPECT_FALSE(IsSubByte({kInt, 4, 2}));            // 8 bits: one whole byte.
  EXPECT_FALSE(IsSubByte({kFloat6_e2m3fn, 6, 4}));  // 24 bits.
  EXPECT_FALSE(IsSubByte({kFloat8_e5m2, 8, 1}));
  EXPECT_FALSE(IsSubByte({kBool, 8, 1}));
}

TEST(DataTypeTest, ElementBytes) {
  EXPECT_EQ(ElementBytes({kBool, 8, 1}), 1u);
  EXPECT_EQ(ElementBytes({kComplex, 128, 1}), 16u);
  EXPECT_EQ(ElementBytes({kFloat8_e4m3fn, 8, 1}), 1u);
  EXPECT_EQ(ElementBytes({kInt, 4, 2}), 1u);
  EXPECT_EQ(ElementBytes({kInt, 4, 1}), 0u);
  EXPECT_EQ(ElementBytes({kFloat6_e2m3fn, 6, 1}), 0u);
  EXPECT_EQ(ElementBits({kFloat, 64, kMaxLanes}), 64u * kMaxLanes);
}

TEST(DataTypeTest, EqualityComparesEveryField) {
  const DLDataType f32{kFloat, 32, 1};
  EXPECT_TRUE(f32 == (DLDataType{kFloat, 32, 1}));
  EXPECT_FALSE(f32 == (DLDataType{kInt, 32, 1}));
  EXPECT_FALSE(f32 == (DLDataType{kFloat, 64, 1}));
  EXPECT_FALSE(f32 == (DLDataType{kFloat, 32, 2}));
}

}  // namespace
}  // namespace tensord::dlpack
