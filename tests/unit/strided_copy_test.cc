#include "service/dlpack/strided_copy.h"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord::dlpack {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr DLDataType kF32{kFloat, 32, 1};
constexpr DLDataType kU8{kUInt, 8, 1};
constexpr uint8_t kUntouched = 0xEE;

TensorLayout Layout(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
                    uint64_t byte_offset = 0) {
  TensorLayout layout;
  layout.dtype = dtype;
  layout.shape = std::move(shape);
  layout.strides = std::move(strides);
  layout.byte_offset = byte_offset;
  return layout;
}

// Byte offset of element `index` in `layout`: the definition the fast path
// must agree with.
int64_t ElementOffset(const TensorLayout& layout, const std::vector<int64_t>& index) {
  const std::vector<int64_t> strides = EffectiveStrides(layout);
  int64_t offset = 0;
  for (size_t i = 0; i < index.size(); ++i) offset += index[i] * strides[i];
  return static_cast<int64_t>(layout.byte_offset) +
         offset * static_cast<int64_t>(ElementBytes(layout.dtype));
}

// Element-by-element copy over every multi-index.
void NaiveCopy(const uint8_t* source, const TensorLayout& source_layout, uint8_t* destination,
               const TensorLayout& destination_layout) {
  const size_t ndim = source_layout.shape.size();
  for (int64_t extent : source_layout.shape) {
    if (extent == 0) return;
  }
  const size_t element_bytes = ElementBytes(source_layout.dtype);
  std::vector<int64_t> index(ndim, 0);
  while (true) {
    std::memcpy(destination + ElementOffset(destination_layout, index),
                source + ElementOffset(source_layout, index), element_bytes);
    size_t d = ndim;
    while (d > 0) {
      --d;
      if (++index[d] < source_layout.shape[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (ndim == 0) return;
  }
}

std::vector<uint8_t> Iota(size_t n) {
  std::vector<uint8_t> bytes(n);
  std::iota(bytes.begin(), bytes.end(), uint8_t{1});
  return bytes;
}

// Copies with CopyStrided and with NaiveCopy into buffers pre-filled with
// kUntouched and expects identical results (so bytes outside the destination
// elements must stay untouched too).
void ExpectMatchesNaive(const TensorLayout& source_layout, const TensorLayout& destination_layout) {
  auto source_bytes = RequiredBytes(source_layout);
  auto destination_bytes = RequiredBytes(destination_layout);
  ASSERT_TRUE(source_bytes.ok()) << source_bytes.status();
  ASSERT_TRUE(destination_bytes.ok()) << destination_bytes.status();
  const std::vector<uint8_t> source = Iota(*source_bytes);
  std::vector<uint8_t> expected(*destination_bytes, kUntouched);
  std::vector<uint8_t> actual(*destination_bytes, kUntouched);
  NaiveCopy(source.data(), source_layout, expected.data(), destination_layout);
  ASSERT_TRUE(CopyStrided(source.data(), source_layout, actual.data(), destination_layout).ok());
  EXPECT_EQ(actual, expected) << DescribeLayout(source_layout) << " -> "
                              << DescribeLayout(destination_layout);
}

TEST(CopyStridedTest, CompactToCompact) {
  const std::vector<uint8_t> source = Iota(24);
  std::vector<uint8_t> destination(24);
  ASSERT_TRUE(CopyStrided(source.data(), Layout(kF32, {2, 3}), destination.data(),
                          Layout(kF32, {2, 3}, {3, 1}))
                  .ok());
  EXPECT_EQ(destination, source);
}

TEST(CopyStridedTest, TransposeFloat32) {
  const float source[6] = {0, 1, 2, 3, 4, 5};  // 2x3 row-major.
  float destination[6] = {};
  // Read the 2x3 through column-major strides of its transpose's storage.
  ASSERT_TRUE(
      CopyStrided(source, Layout(kF32, {3, 2}, {1, 3}), destination, Layout(kF32, {3, 2})).ok());
  EXPECT_THAT(destination, ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(CopyStridedTest, ReverseWithNegativeStride) {
  const float source[4] = {1, 2, 3, 4};
  float destination[4] = {};
  ASSERT_TRUE(
      CopyStrided(source, Layout(kF32, {4}, {-1}, 12), destination, Layout(kF32, {4})).ok());
  EXPECT_THAT(destination, ElementsAre(4, 3, 2, 1));
}

TEST(CopyStridedTest, ZeroDimCopiesOneElement) {
  const float source[3] = {7, 8, 9};
  float destination[2] = {0, 0};
  ASSERT_TRUE(
      CopyStrided(source, Layout(kF32, {}, {}, 8), destination, Layout(kF32, {}, {}, 4)).ok());
  EXPECT_THAT(destination, ElementsAre(0, 9));
}

TEST(CopyStridedTest, ZeroSizeIsNoOp) {
  std::vector<uint8_t> destination(4, kUntouched);
  ASSERT_TRUE(
      CopyStrided(nullptr, Layout(kF32, {3, 0}), destination.data(), Layout(kF32, {3, 0}, {1, 1}))
          .ok());
  EXPECT_THAT(destination, ElementsAre(kUntouched, kUntouched, kUntouched, kUntouched));
}

TEST(CopyStridedTest, MatchesNaiveOnTransposes) {
  ExpectMatchesNaive(Layout(kF32, {3, 4}, {1, 3}), Layout(kF32, {3, 4}));
  ExpectMatchesNaive(Layout(kF32, {3, 4}), Layout(kF32, {3, 4}, {1, 3}));
  ExpectMatchesNaive(Layout(kU8, {2, 3, 4}, {1, 2, 6}), Layout(kU8, {2, 3, 4}, {12, 1, 3}));
  ExpectMatchesNaive(Layout(DLDataType{kFloat, 64, 1}, {5, 7}, {1, 5}),
                     Layout(DLDataType{kFloat, 64, 1}, {5, 7}));
}

TEST(CopyStridedTest, MatchesNaiveOnSlices) {
  // Every other column of a 4x8, and the inner 2x2x3 block of a 4x4x5.
  ExpectMatchesNaive(Layout(kF32, {4, 4}, {8, 2}, 4), Layout(kF32, {4, 4}));
  ExpectMatchesNaive(Layout(kU8, {2, 2, 3}, {20, 5, 1}, 26), Layout(kU8, {2, 2, 3}));
  // Contiguous rows inside padded rows, to padded rows elsewhere.
  ExpectMatchesNaive(Layout(kF32, {3, 5}, {8, 1}), Layout(kF32, {3, 5}, {6, 1}, 4));
}

TEST(CopyStridedTest, MatchesNaiveOnNegativeStrides) {
  ExpectMatchesNaive(Layout(kF32, {3, 4}, {-4, 1}, 32), Layout(kF32, {3, 4}));
  ExpectMatchesNaive(Layout(kF32, {3, 4}, {4, -1}, 12), Layout(kF32, {3, 4}));
  ExpectMatchesNaive(Layout(kF32, {3, 4}, {-4, -1}, 44), Layout(kF32, {3, 4}));
  ExpectMatchesNaive(Layout(kF32, {3, 4}), Layout(kF32, {3, 4}, {-1, -3}, 44));
}

TEST(CopyStridedTest, MatchesNaiveOnOddElementSizesAndLanes) {
  const DLDataType complex128{kComplex, 128, 1};
  const DLDataType u8x3{kUInt, 8, 3};
  const DLDataType f32x64{kFloat, 32, 64};
  ExpectMatchesNaive(Layout(complex128, {3, 2}, {1, 3}), Layout(complex128, {3, 2}));
  ExpectMatchesNaive(Layout(u8x3, {4, 3}, {1, 4}), Layout(u8x3, {4, 3}));
  ExpectMatchesNaive(Layout(f32x64, {2, 2}, {1, 2}), Layout(f32x64, {2, 2}));
  ExpectMatchesNaive(Layout(DLDataType{kInt, 16, 1}, {5}, {3}),
                     Layout(DLDataType{kInt, 16, 1}, {5}));
}

// Both sides compact (one memcpy, unplanned): byte offsets, lanes, spelled
// out strides, extent-1 dims with any stride, 0-d and empty tensors.
TEST(CopyStridedTest, CompactLayoutsMatchNaive) {
  const DLDataType u8x3{kUInt, 8, 3};
  ExpectMatchesNaive(Layout(kF32, {2, 3}, {}, 4), Layout(kF32, {2, 3}, {3, 1}, 12));
  ExpectMatchesNaive(Layout(u8x3, {4, 3}, {}, 5), Layout(u8x3, {4, 3}, {3, 1}, 7));
  ExpectMatchesNaive(Layout(kF32, {1, 4, 1}, {7, 1, 3}, 8), Layout(kF32, {1, 4, 1}, {}, 1));
  ExpectMatchesNaive(Layout(kU8, {}, {}, 3), Layout(kU8, {}));
  ExpectMatchesNaive(Layout(kF32, {0, 5}), Layout(kF32, {0, 5}, {5, 1}));
  ExpectMatchesNaive(Layout(kU8, {4096}), Layout(kU8, {4096}, {}, 64));
}

TEST(CopyStridedTest, ExtentOneDimsAndBroadcastSource) {
  ExpectMatchesNaive(Layout(kF32, {1, 4, 1}, {99, 1, -5}), Layout(kF32, {1, 4, 1}));
  ExpectMatchesNaive(Layout(kF32, {3, 4}, {0, 1}), Layout(kF32, {3, 4}));
  ExpectMatchesNaive(Layout(kF32, {3, 4}, {0, 0}), Layout(kF32, {3, 4}, {1, 3}));
}

// Random shapes and strides (permuted, padded, sliced, sometimes reversed)
// against the naive copy.
TEST(CopyStridedTest, MatchesNaiveOnRandomLayouts) {
  std::mt19937 rng(12345);
  const DLDataType dtypes[] = {kU8, DLDataType{kInt, 16, 1}, kF32, DLDataType{kFloat, 64, 1},
                               DLDataType{kUInt, 8, 3}};
  auto random_layout = [&](DLDataType dtype, const std::vector<int64_t>& shape) {
    const size_t ndim = shape.size();
    std::vector<size_t> order(ndim);
    std::iota(order.begin(), order.end(), size_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> strides(ndim);
    int64_t stride = 1 + static_cast<int64_t>(rng() % 2);
    for (size_t k = ndim; k-- > 0;) {
      strides[order[k]] = stride;
      stride *= shape[order[k]] + static_cast<int64_t>(rng() % 2);
    }
    int64_t before = 0;  // Elements reached before element 0 by reversed dims.
    for (size_t i = 0; i < ndim; ++i) {
      if (rng() % 3 == 0) {
        strides[i] = -strides[i];
        before += (shape[i] - 1) * -strides[i];
      }
    }
    const uint64_t offset = static_cast<uint64_t>(before + rng() % 3) * ElementBytes(dtype);
    return Layout(dtype, shape, strides, offset);
  };
  for (int trial = 0; trial < 300; ++trial) {
    const DLDataType dtype = dtypes[rng() % std::size(dtypes)];
    std::vector<int64_t> shape(rng() % 5);
    for (int64_t& extent : shape) extent = 1 + static_cast<int64_t>(rng() % 4);
    ExpectMatchesNaive(random_layout(dtype, shape), random_layout(dtype, shape));
    if (HasFailure()) return;
  }
}

TEST(CopyStridedTest, SubByteCompactIsOneCopy) {
  const DLDataType fp4{kFloat4_e2m1fn, 4, 1};
  const std::vector<uint8_t> source = {0x21, 0x43, 0x05};  // 5 packed fp4 elements.
  std::vector<uint8_t> destination(3, 0);
  ASSERT_TRUE(
      CopyStrided(source.data(), Layout(fp4, {5}), destination.data(), Layout(fp4, {5}, {1})).ok());
  EXPECT_THAT(destination, ElementsAreArray(source));

  const DLDataType fp6{kFloat6_e3m2fn, 6, 1};
  const std::vector<uint8_t> six = Iota(4);  // 5 fp6 elements: 30 bits.
  std::vector<uint8_t> six_out(4, 0);
  ASSERT_TRUE(
      CopyStrided(six.data(), Layout(fp6, {1, 5}), six_out.data(), Layout(fp6, {1, 5}, {7, 1}))
          .ok());
  EXPECT_EQ(six_out, six);
}

TEST(CopyStridedTest, SubByteRejectsStrided) {
  const DLDataType i4{kInt, 4, 1};
  uint8_t source[4] = {};
  uint8_t destination[4] = {};
  absl::Status status =
      CopyStrided(source, Layout(i4, {2, 3}, {1, 2}), destination, Layout(i4, {2, 3}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("compact"));
}

TEST(CopyStridedTest, RejectsMismatchedDtypeOrShape) {
  float source[6] = {};
  float destination[6] = {};
  absl::Status dtype =
      CopyStrided(source, Layout(kF32, {6}), destination, Layout(DLDataType{kInt, 32, 1}, {6}));
  EXPECT_EQ(dtype.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dtype.message(), HasSubstr("float32"));
  EXPECT_THAT(dtype.message(), HasSubstr("int32"));
  absl::Status shape = CopyStrided(source, Layout(kF32, {2, 3}), destination, Layout(kF32, {3, 2}));
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.message(), HasSubstr("[2,3]"));
  EXPECT_THAT(shape.message(), HasSubstr("[3,2]"));
}

TEST(CopyStridedTest, RejectsInvalidDtypeAndShape) {
  float buffer[4] = {};
  EXPECT_FALSE(CopyStrided(buffer, Layout(DLDataType{42, 8, 1}, {1}), buffer,
                           Layout(DLDataType{42, 8, 1}, {1}))
                   .ok());
  EXPECT_FALSE(CopyStrided(buffer, Layout(kF32, {-1}), buffer, Layout(kF32, {-1})).ok());
  EXPECT_FALSE(CopyStrided(buffer, Layout(kF32, {2, 2}, {1}), buffer, Layout(kF32, {2, 2})).ok());
}

}  // namespace
}  // namespace tensord::dlpack
