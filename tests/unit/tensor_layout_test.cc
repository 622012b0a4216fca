#include "service/dlpack/tensor_layout.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/dlpack/data_type.h"

namespace tensord::dlpack {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr DLDataType kF32{kFloat, 32, 1};
constexpr DLDataType kF64{kFloat, 64, 1};
constexpr DLDataType kU8{kUInt, 8, 1};
constexpr DLDataType kFp4{kFloat4_e2m1fn, 4, 1};
constexpr DLDataType kFp6{kFloat6_e2m3fn, 6, 1};
constexpr DLDataType kI4{kInt, 4, 1};
constexpr int64_t kBig = int64_t{1} << 40;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

TensorLayout Layout(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
                    uint64_t byte_offset = 0) {
  TensorLayout layout;
  layout.dtype = dtype;
  layout.shape = std::move(shape);
  layout.strides = std::move(strides);
  layout.byte_offset = byte_offset;
  return layout;
}

void ExpectInvalid(const absl::Status& status, const std::string& fragment) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(fragment));
}

TEST(ElementCountTest, CountsExtents) {
  EXPECT_EQ(*ElementCount({}), 1u);  // 0-d: one element.
  const std::vector<int64_t> shape{2, 3, 4};
  EXPECT_EQ(*ElementCount(shape), 24u);
}

TEST(ElementCountTest, ZeroExtentIsEmptyEvenWhenOthersAreHuge) {
  const std::vector<int64_t> shape{kBig, kBig, 0};
  EXPECT_EQ(*ElementCount(shape), 0u);
}

TEST(ElementCountTest, RejectsNegativeExtent) {
  const std::vector<int64_t> shape{2, -3};
  EXPECT_EQ(ElementCount(shape).status().message(), "shape[1] is -3; extents must be >= 0");
  // Negative extents are caught even where a zero would make numel 0.
  const std::vector<int64_t> with_zero{0, -1};
  ExpectInvalid(ElementCount(with_zero).status(), "shape[1] is -1");
}

TEST(ElementCountTest, RejectsOverflow) {
  const std::vector<int64_t> shape{kBig, kBig};
  EXPECT_EQ(ElementCount(shape).status().message(),
            "element count of shape [1099511627776,1099511627776] overflows int64");
  const std::vector<int64_t> edge{kInt64Max, 1};
  EXPECT_EQ(*ElementCount(edge), static_cast<uint64_t>(kInt64Max));
  const std::vector<int64_t> past{kInt64Max, 2};
  EXPECT_FALSE(ElementCount(past).ok());
}

TEST(ElementCountTest, RejectsTooManyDims) {
  const std::vector<int64_t> ok(kMaxDims, 1);
  EXPECT_TRUE(ElementCount(ok).ok());
  const std::vector<int64_t> too_many(kMaxDims + 1, 1);
  ExpectInvalid(ElementCount(too_many).status(), "ndim 33");
}

TEST(CompactByteSizeTest, ByteAddressable) {
  EXPECT_EQ(*CompactByteSize(kF32, std::vector<int64_t>{2, 3}), 24u);
  EXPECT_EQ(*CompactByteSize(kF32, std::vector<int64_t>{}), 4u);
  EXPECT_EQ(*CompactByteSize(kF32, std::vector<int64_t>{0, 5}), 0u);
  EXPECT_EQ(*CompactByteSize(DLDataType{kFloat, 32, 4}, std::vector<int64_t>{3}), 48u);
  EXPECT_EQ(*CompactByteSize(DLDataType{kComplex, 128, 1}, std::vector<int64_t>{2}), 32u);
}

TEST(CompactByteSizeTest, SubBytePacksDenselyAndRoundsUp) {
  EXPECT_EQ(*CompactByteSize(kFp4, std::vector<int64_t>{3}), 2u);
  EXPECT_EQ(*CompactByteSize(kFp4, std::vector<int64_t>{4}), 2u);
  EXPECT_EQ(*CompactByteSize(kFp6, std::vector<int64_t>{5}), 4u);  // 30 bits.
  EXPECT_EQ(*CompactByteSize(kFp6, std::vector<int64_t>{4}), 3u);
  EXPECT_EQ(*CompactByteSize(DLDataType{kUInt, 1, 1}, std::vector<int64_t>{9}), 2u);
  EXPECT_EQ(*CompactByteSize(DLDataType{kInt, 2, 1}, std::vector<int64_t>{}), 1u);
  EXPECT_EQ(*CompactByteSize(DLDataType{kInt, 4, 3}, std::vector<int64_t>{3}), 5u);  // 36 bits.
  EXPECT_EQ(*CompactByteSize(kI4, std::vector<int64_t>{0}), 0u);
}

TEST(CompactByteSizeTest, RejectsOverflowAndBadInput) {
  ExpectInvalid(CompactByteSize(kF64, std::vector<int64_t>{kInt64Max / 4}).status(),
                "overflows int64");
  ExpectInvalid(CompactByteSize(kF32, std::vector<int64_t>{kBig, kBig}).status(),
                "overflows int64");
  // numel * bits overflows uint64 even though numel fits.
  ExpectInvalid(CompactByteSize(kFp4, std::vector<int64_t>{kInt64Max}).status(), "overflows int64");
  ExpectInvalid(CompactByteSize(DLDataType{42, 8, 1}, std::vector<int64_t>{1}).status(),
                "dtype code 42");
  ExpectInvalid(CompactByteSize(kF32, std::vector<int64_t>{-1}).status(), "shape[0] is -1");
}

TEST(CompactStridesTest, RowMajor) {
  EXPECT_THAT(CompactStrides(std::vector<int64_t>{2, 3, 4}), ElementsAre(12, 4, 1));
  EXPECT_TRUE(CompactStrides(std::vector<int64_t>{}).empty());
  EXPECT_THAT(CompactStrides(std::vector<int64_t>{2, 0, 4}), ElementsAre(4, 4, 1));
  // An unvalidated shape that overflows saturates instead of wrapping.
  const int64_t big = int64_t{1} << 40;
  EXPECT_THAT(CompactStrides(std::vector<int64_t>{2, big, big}),
              ElementsAre(std::numeric_limits<int64_t>::max(), big, 1));
  std::vector<int64_t> into(2, -7);
  CompactStridesInto(std::vector<int64_t>{4, 5}, into);
  EXPECT_THAT(into, ElementsAre(5, 1));
}

TEST(EffectiveStridesTest, FillsCompactWhenEmpty) {
  EXPECT_THAT(EffectiveStrides(Layout(kF32, {2, 3})), ElementsAre(3, 1));
  EXPECT_THAT(EffectiveStrides(Layout(kF32, {2, 3}, {1, 2})), ElementsAre(1, 2));
}

TEST(IsCompactTest, Cases) {
  EXPECT_TRUE(IsCompact(Layout(kF32, {2, 3})));
  EXPECT_TRUE(IsCompact(Layout(kF32, {2, 3}, {3, 1})));
  EXPECT_FALSE(IsCompact(Layout(kF32, {2, 3}, {1, 2})));
  EXPECT_FALSE(IsCompact(Layout(kF32, {2, 3}, {6, 1})));
  // Strides of extent-1 dimensions address nothing.
  EXPECT_TRUE(IsCompact(Layout(kF32, {1, 3}, {99, 1})));
  EXPECT_TRUE(IsCompact(Layout(kF32, {3, 1}, {1, 7})));
  // Empty tensors are compact whatever the strides.
  EXPECT_TRUE(IsCompact(Layout(kF32, {2, 0}, {5, 9})));
  EXPECT_TRUE(IsCompact(Layout(kF32, {})));
  EXPECT_FALSE(IsCompact(Layout(kF32, {2, 3}, {1})));
  EXPECT_FALSE(IsCompact(Layout(kF32, {2, 3}, {-3, 1})));
}

TEST(RequiredBytesTest, NegativeStrideReachingInt64MinIsRefused) {
  // (2 - 1) * INT64_MIN reaches exactly INT64_MIN: negating it overflows
  // (found by the snapshot_format fuzzer through a snapshot's layout).
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (uint64_t byte_offset : {uint64_t{0}, uint64_t{1} << 62}) {
    absl::StatusOr<uint64_t> bytes = RequiredBytes(Layout(kU8, {2}, {kMin}, byte_offset));
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument) << bytes.status();
  }
  absl::StatusOr<uint64_t> before = BytesBeforeFirstElement(Layout(kU8, {2}, {kMin}));
  EXPECT_EQ(before.status().code(), absl::StatusCode::kInvalidArgument) << before.status();
}

TEST(RequiredBytesTest, CompactAndOffset) {
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {2, 3})), 24u);
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {2, 3}, {}, 8)), 32u);
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {})), 4u);
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {}, {}, 12)), 16u);
}

TEST(RequiredBytesTest, ZeroSizeNeedsOnlyOffset) {
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {3, 0})), 0u);
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {3, 0}, {1000, 1}, 16)), 16u);
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {kBig, kBig, 0})), 0u);
}

TEST(RequiredBytesTest, StridedExtent) {
  // Transpose of a 3x2: element (1, 2) sits at 1 + 2*2 = 5.
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {2, 3}, {1, 2})), 24u);
  // Every other column of a 2x6: max offset 6 + 4 = 10.
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {2, 3}, {6, 2})), 44u);
  // Broadcast: zero strides reach one element.
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {100, 100}, {0, 0})), 4u);
  // Padded rows.
  EXPECT_EQ(*RequiredBytes(Layout(kU8, {2, 3}, {8, 1}, 4)), 4u + 8 + 3);
}

TEST(RequiredBytesTest, NegativeStridesNeedByteOffset) {
  // A reversed 4-vector of float32 starting at the last element.
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {4}, {-1}, 12)), 16u);
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {2, 3}, {-3, 1}, 12)), 24u);
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {2, 3}, {3, -1}, 8)), 24u);
  absl::Status status = RequiredBytes(Layout(kF32, {4}, {-1}, 8)).status();
  ExpectInvalid(status, "byte_offset is only 8");
  ExpectInvalid(status, "strides[0] = -1");
  ExpectInvalid(RequiredBytes(Layout(kF32, {2, 3}, {3, -2}, 0)).status(), "strides[1] = -2");
  // Negative strides on extent-1 dimensions reach nothing.
  EXPECT_EQ(*RequiredBytes(Layout(kF32, {1, 3}, {-7, 1})), 12u);
}

TEST(RequiredBytesTest, RejectsStridesCountMismatch) {
  EXPECT_EQ(RequiredBytes(Layout(kF32, {2, 3, 4}, {12, 1})).status().message(),
            "strides has 2 entries but ndim is 3");
}

TEST(RequiredBytesTest, RejectsBadDtypeShapeAndNdim) {
  ExpectInvalid(RequiredBytes(Layout(DLDataType{kFloat, 8, 1}, {2})).status(),
                "float bits 8 is not one of 16, 32, 64");
  ExpectInvalid(RequiredBytes(Layout(kF32, {2, -3})).status(),
                "shape[1] is -3; extents must be >= 0");
  ExpectInvalid(RequiredBytes(Layout(kF32, std::vector<int64_t>(kMaxDims + 1, 1))).status(),
                "ndim 33");
}

TEST(RequiredBytesTest, RejectsOverflow) {
  ExpectInvalid(RequiredBytes(Layout(kF32, {kBig, kBig})).status(), "overflows int64");
  // numel fits but the strides reach past int64.
  ExpectInvalid(RequiredBytes(Layout(kF32, {3}, {kInt64Max / 2})).status(), "overflows int64");
  ExpectInvalid(RequiredBytes(Layout(kF32, {2, 2}, {kInt64Max / 2, kInt64Max / 2})).status(),
                "overflows int64");
  // Offsets fit in elements but not once multiplied by the element size.
  ExpectInvalid(RequiredBytes(Layout(kF64, {2}, {kInt64Max / 4})).status(), "overflows int64");
  ExpectInvalid(RequiredBytes(Layout(kF64, {2}, {-(kInt64Max / 4)}, 8)).status(),
                "overflows int64");
  ExpectInvalid(RequiredBytes(Layout(kU8, {1}, {}, uint64_t{1} << 63)).status(), "byte_offset");
  ExpectInvalid(RequiredBytes(Layout(kU8, {2}, {}, static_cast<uint64_t>(kInt64Max))).status(),
                "overflows int64");
  EXPECT_EQ(*RequiredBytes(Layout(kU8, {1}, {}, static_cast<uint64_t>(kInt64Max) - 1)),
            static_cast<uint64_t>(kInt64Max));
}

// Empty strides (compact) take a shortcut in RequiredBytes and
// BytesBeforeFirstElement; the same layout with its compact strides
// spelled out takes the general path: they agree, value for value and
// error for error.
TEST(RequiredBytesTest, CompactShortcutAgreesWithExplicitCompactStrides) {
  const std::vector<std::vector<int64_t>> shapes = {
      {},     {1},          {4096},          {2, 3},           {7, 1, 5},
      {0, 9}, {kBig, 1024}, {kBig, 1 << 20}, {kInt64Max / 16}, {kInt64Max / 4}};
  const std::vector<uint64_t> offsets = {0, 8, static_cast<uint64_t>(kInt64Max) - 100,
                                         static_cast<uint64_t>(kInt64Max)};
  for (DLDataType dtype : {kU8, kF32, kF64, DLDataType{kFloat, 32, 4}}) {
    for (const std::vector<int64_t>& shape : shapes) {
      for (uint64_t offset : offsets) {
        const TensorLayout compact = Layout(dtype, shape, {}, offset);
        const TensorLayout spelled_out = Layout(dtype, shape, CompactStrides(shape), offset);
        const absl::StatusOr<uint64_t> before_shortcut = BytesBeforeFirstElement(compact);
        const absl::StatusOr<uint64_t> before_general = BytesBeforeFirstElement(spelled_out);
        ASSERT_EQ(before_shortcut.ok(), before_general.ok());
        if (before_shortcut.ok()) {
          EXPECT_EQ(*before_shortcut, *before_general);
        }
        const absl::StatusOr<uint64_t> shortcut = RequiredBytes(compact);
        const absl::StatusOr<uint64_t> general = RequiredBytes(spelled_out);
        SCOPED_TRACE(testing::Message() << DescribeLayout(Layout(dtype, shape, {}, offset)));
        ASSERT_EQ(shortcut.ok(), general.ok()) << shortcut.status() << " / " << general.status();
        if (shortcut.ok()) {
          EXPECT_EQ(*shortcut, *general);
        } else {
          EXPECT_EQ(shortcut.status().code(), general.status().code());
          EXPECT_THAT(shortcut.status().message(), HasSubstr("overflows int64"));
        }
      }
    }
  }
}

TEST(RequiredBytesTest, SubByteMustBeCompactAtOffsetZero) {
  EXPECT_EQ(*RequiredBytes(Layout(kFp4, {3})), 2u);
  EXPECT_EQ(*RequiredBytes(Layout(kFp6, {5})), 4u);
  EXPECT_EQ(*RequiredBytes(Layout(kI4, {2, 3}, {3, 1})), 3u);
  EXPECT_EQ(*RequiredBytes(Layout(kI4, {0, 3}, {7, 7})), 0u);
  absl::Status offset = RequiredBytes(Layout(kI4, {2, 3}, {}, 1)).status();
  ExpectInvalid(offset, "byte_offset must be 0, not 1");
  ExpectInvalid(offset, "int4");
  absl::Status strided = RequiredBytes(Layout(kFp4, {2, 3}, {1, 2})).status();
  ExpectInvalid(strided, "must be compact");
  ExpectInvalid(strided, "[1,2]");
}

TEST(ValidateLayoutFitsTest, NamesBothSizes) {
  EXPECT_TRUE(ValidateLayoutFits(Layout(kF32, {2, 3}), 24).ok());
  EXPECT_TRUE(ValidateLayoutFits(Layout(kF32, {2, 3}), 100).ok());
  absl::Status status = ValidateLayoutFits(Layout(kF32, {2, 3}, {}, 8), 24);
  ExpectInvalid(status, "needs 32 bytes");
  ExpectInvalid(status, "holds 24");
  // Strides reaching out of the buffer.
  ExpectInvalid(ValidateLayoutFits(Layout(kF32, {2, 3}, {4, 1}), 24), "needs 28 bytes");
  ExpectInvalid(ValidateLayoutFits(Layout(kF32, {2, -1}), 1 << 20), "shape[1]");
}

TEST(LayoutOfTest, CopiesEveryField) {
  int64_t shape[] = {2, 3};
  int64_t strides[] = {1, 2};
  DLTensor tensor{};
  tensor.ndim = 2;
  tensor.shape = shape;
  tensor.strides = strides;
  tensor.dtype = kF64;
  tensor.byte_offset = 16;
  tensor.device = {kDLCUDA, 1};
  auto layout = LayoutOf(tensor);
  ASSERT_TRUE(layout.ok()) << layout.status();
  TensorLayout expected = Layout(kF64, {2, 3}, {1, 2}, 16);
  expected.device = {kDLCUDA, 1};
  EXPECT_TRUE(*layout == expected);
}

TEST(LayoutOfTest, NullStridesMeanCompact) {
  int64_t shape[] = {4};
  DLTensor tensor{};
  tensor.ndim = 1;
  tensor.shape = shape;
  tensor.dtype = kF32;
  auto layout = LayoutOf(tensor);
  ASSERT_TRUE(layout.ok());
  EXPECT_TRUE(layout->strides.empty());
  EXPECT_THAT(layout->shape, ElementsAre(4));
}

TEST(LayoutOfTest, ZeroDimAllowsNullShape) {
  DLTensor tensor{};
  tensor.dtype = kF32;
  auto layout = LayoutOf(tensor);
  ASSERT_TRUE(layout.ok());
  EXPECT_TRUE(layout->shape.empty());
}

TEST(LayoutOfTest, RejectsBadNdimAndNullShape) {
  int64_t shape[kMaxDims + 1] = {};
  DLTensor tensor{};
  tensor.dtype = kF32;
  tensor.shape = shape;
  tensor.ndim = -1;
  ExpectInvalid(LayoutOf(tensor).status(), "ndim -1");
  tensor.ndim = kMaxDims + 1;
  ExpectInvalid(LayoutOf(tensor).status(), "ndim 33");
  tensor.ndim = 2;
  tensor.shape = nullptr;
  ExpectInvalid(LayoutOf(tensor).status(), "shape is NULL but ndim is 2");
}

TEST(TensorLayoutTest, EqualityComparesEveryField) {
  const TensorLayout base = Layout(kF32, {2, 3}, {3, 1}, 8);
  EXPECT_TRUE(base == base);
  TensorLayout other = base;
  other.dtype = kF64;
  EXPECT_FALSE(base == other);
  other = base;
  other.shape = {3, 2};
  EXPECT_FALSE(base == other);
  other = base;
  other.strides = {};
  EXPECT_FALSE(base == other);
  other = base;
  other.byte_offset = 0;
  EXPECT_FALSE(base == other);
  other = base;
  other.device.device_type = kDLCUDA;
  EXPECT_FALSE(base == other);
  other = base;
  other.device.device_id = 3;
  EXPECT_FALSE(base == other);
}

TEST(DescribeLayoutTest, Formats) {
  EXPECT_EQ(DescribeLayout(Layout(kF32, {2, 3})), "float32[2,3]");
  EXPECT_EQ(DescribeLayout(Layout(kF32, {2, 3}, {1, 2}, 8)),
            "float32[2,3] strides=[1,2] byte_offset=8");
  EXPECT_EQ(DescribeLayout(Layout(kF32, {})), "float32[]");
}

}  // namespace
}  // namespace tensord::dlpack
