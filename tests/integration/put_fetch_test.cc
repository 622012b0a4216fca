// Put and fetch through tensord::Client against a real server: every dtype,
// scalar and empty tensors, non-contiguous inputs, FetchInto and ranges. The
// fetched bytes are compared exactly.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/raw_stub.h"

namespace tensord::testing {
namespace {

class PutFetchTest : public ClientServerTest<PutFetchTest> {};

bool SameDtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// 0, 1, 2, ... as float32.
std::vector<float> Iota(size_t count, float start = 0) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = start + static_cast<float>(i);
  return values;
}

// Puts `tensor`, fetches it back and checks it is the compact tensor of
// `dtype`/`shape` holding `expected`.
void ExpectRoundTrip(Client& client, const std::string& name, const HostTensor& tensor,
                     const std::vector<uint8_t>& expected) {
  absl::StatusOr<TensorInfo> put = client.Put(name, tensor.dl());
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->name, name);
  EXPECT_GT(put->version, 0u);
  EXPECT_TRUE(SameDtype(put->dtype, tensor.dtype));
  EXPECT_EQ(put->shape, tensor.shape);
  EXPECT_EQ(put->strides, RowMajorStrides(tensor.shape)) << "stored tensors are packed";
  EXPECT_EQ(put->byte_offset, 0u);
  EXPECT_EQ(put->total_bytes, expected.size());
  EXPECT_EQ(put->crc32c, Crc32c(expected.data(), expected.size()));

  absl::StatusOr<Tensor> fetched = client.Fetch(name);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  const DLTensor& dl = fetched->dl_tensor();
  EXPECT_EQ(fetched->info().version, put->version);
  EXPECT_TRUE(SameDtype(dl.dtype, tensor.dtype));
  EXPECT_EQ(dl.ndim, static_cast<int32_t>(tensor.shape.size()));
  EXPECT_EQ(ShapeOf(dl), tensor.shape);
  if (dl.ndim > 0) {
    EXPECT_EQ(StridesOf(dl), RowMajorStrides(tensor.shape)) << "strides must always be filled";
  }
  EXPECT_NE(dl.data, nullptr);
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(fetched->data_bytes(), expected.size());
  std::vector<uint8_t> bytes = TensorBytes(*fetched);
  EXPECT_TRUE(BytesEqual(bytes.data(), bytes.size(), expected));
}

struct DtypeCase {
  const char* name;
  DLDataType dtype;
};

constexpr DtypeCase kDtypes[] = {
    {"int8", {dlpack::kInt, 8, 1}},
    {"int16", {dlpack::kInt, 16, 1}},
    {"int32", {dlpack::kInt, 32, 1}},
    {"int64", {dlpack::kInt, 64, 1}},
    {"uint8", {dlpack::kUInt, 8, 1}},
    {"uint16", {dlpack::kUInt, 16, 1}},
    {"uint32", {dlpack::kUInt, 32, 1}},
    {"uint64", {dlpack::kUInt, 64, 1}},
    {"float16", {dlpack::kFloat, 16, 1}},
    {"float32", {dlpack::kFloat, 32, 1}},
    {"float64", {dlpack::kFloat, 64, 1}},
    {"bfloat16", {dlpack::kBfloat, 16, 1}},
    {"complex64", {dlpack::kComplex, 64, 1}},
    {"complex128", {dlpack::kComplex, 128, 1}},
    {"bool", {dlpack::kBool, 8, 1}},
    {"float8_e4m3fn", {dlpack::kFloat8_e4m3fn, 8, 1}},
    {"float8_e5m2", {dlpack::kFloat8_e5m2, 8, 1}},
    {"float8_e8m0fnu", {dlpack::kFloat8_e8m0fnu, 8, 1}},
    {"float6_e2m3fn", {dlpack::kFloat6_e2m3fn, 6, 1}},
    {"float4_e2m1fn", {dlpack::kFloat4_e2m1fn, 4, 1}},
    {"int4", {dlpack::kInt, 4, 1}},
    {"uint1", {dlpack::kUInt, 1, 1}},
    {"float32x4", {dlpack::kFloat, 32, 4}},
    {"uint8x3", {dlpack::kUInt, 8, 3}},
};

TEST_P(PutFetchTest, RoundTripsEveryDtype) {
  uint64_t seed = 1;
  for (const DtypeCase& c : kDtypes) {
    SCOPED_TRACE(c.name);
    const std::vector<int64_t> shape = {3, 5};
    std::vector<uint8_t> bytes = PatternBytes(CompactBytes(c.dtype, shape), seed++);
    if (c.dtype.code == dlpack::kBool) {
      for (uint8_t& b : bytes) b &= 1;
    }
    // Packed sub-byte elements: leave the padding bits of the last byte 0.
    const uint64_t bits = 15u * c.dtype.bits * c.dtype.lanes;
    if (bits % 8 != 0) bytes.back() &= static_cast<uint8_t>((1u << (bits % 8)) - 1);
    HostTensor tensor = CompactTensor(c.dtype, shape, bytes);
    ExpectRoundTrip(client(), TestTensorName(c.name), tensor, bytes);
  }
}

TEST_P(PutFetchTest, ScalarTensor) {
  const double value = 3.25;
  std::vector<uint8_t> bytes(sizeof(value));
  std::memcpy(bytes.data(), &value, sizeof(value));
  HostTensor tensor = CompactTensor(DLDataType{dlpack::kFloat, 64, 1}, {}, bytes);
  ExpectRoundTrip(client(), TestTensorName("scalar"), tensor, bytes);
}

TEST_P(PutFetchTest, ZeroSizeTensor) {
  HostTensor tensor = CompactTensor(kF32, {0, 5}, {});
  ASSERT_NE(tensor.dl().data, nullptr);
  ExpectRoundTrip(client(), TestTensorName("empty"), tensor, {});
  absl::StatusOr<Tensor> fetched = client().Fetch(TestTensorName("empty"));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_NE(fetched->dl_tensor().data, nullptr) << "a zero-size tensor still has a data pointer";
}

TEST_P(PutFetchTest, TransposedViewIsStoredInLogicalOrder) {
  // A float32[4,6] matrix seen as its transpose: shape {6,4}, strides {1,6}.
  const std::vector<float> matrix = Iota(24);
  HostTensor view;
  view.dtype = kF32;
  view.shape = {6, 4};
  view.strides = {1, 6};
  view.storage = FloatBytes(matrix);
  std::vector<float> expected;
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 4; ++j) expected.push_back(matrix[j * 6 + i]);
  }
  ExpectRoundTrip(client(), TestTensorName("transposed"), view, FloatBytes(expected));
}

TEST_P(PutFetchTest, StridedSliceIsStoredCompact) {
  // matrix[1:5:2, 1::3] of a float32[6,7] matrix: shape {2,2}, strides {14,3},
  // starting at element [1,1].
  const std::vector<float> matrix = Iota(42, 100);
  HostTensor view;
  view.dtype = kF32;
  view.shape = {2, 2};
  view.strides = {14, 3};
  view.storage = FloatBytes(matrix);
  view.data_offset = (1 * 7 + 1) * sizeof(float);
  const std::vector<float> expected = {matrix[8], matrix[11], matrix[22], matrix[25]};
  ExpectRoundTrip(client(), TestTensorName("slice"), view, FloatBytes(expected));
}

TEST_P(PutFetchTest, NegativeStrideViewIsStoredInLogicalOrder) {
  // A reversed float32[5]: data points at the last element, stride -1.
  const std::vector<float> values = Iota(5, 10);
  HostTensor view;
  view.dtype = kF32;
  view.shape = {5};
  view.strides = {-1};
  view.storage = FloatBytes(values);
  view.data_offset = 4 * sizeof(float);
  ExpectRoundTrip(client(), TestTensorName("reversed"), view, FloatBytes({14, 13, 12, 11, 10}));
}

TEST_P(PutFetchTest, BroadcastViewWithZeroStride) {
  // One row of 4 repeated 3 times (what torch.expand makes): strides {0,1}.
  HostTensor view;
  view.dtype = kF32;
  view.shape = {3, 4};
  view.strides = {0, 1};
  view.storage = FloatBytes({1, 2, 3, 4});
  ExpectRoundTrip(client(), TestTensorName("broadcast"), view,
                  FloatBytes({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));
}

TEST_P(PutFetchTest, ByteOffsetIsHonoured) {
  // int32[10] starting 16 bytes into the buffer.
  std::vector<uint8_t> storage = PatternBytes(16 + 40 + 8, 5);
  HostTensor view;
  view.dtype = kI32;
  view.shape = {10};
  view.storage = storage;
  view.byte_offset = 16;
  ExpectRoundTrip(client(), TestTensorName("offset"), view,
                  std::vector<uint8_t>(storage.begin() + 16, storage.begin() + 56));

  // Strides and byte_offset together: column 1 of an int32[5,3] at offset 8.
  HostTensor column;
  column.dtype = kI32;
  column.shape = {5};
  column.strides = {3};
  column.storage = storage;
  column.byte_offset = 8 + 4;
  std::vector<uint8_t> expected;
  for (int i = 0; i < 5; ++i) {
    expected.insert(expected.end(), storage.begin() + 12 + 12 * i, storage.begin() + 16 + 12 * i);
  }
  ExpectRoundTrip(client(), TestTensorName("column"), column, expected);
}

TEST_P(PutFetchTest, FetchIntoCompactDestination) {
  const std::string name = TestTensorName("t");
  const std::vector<float> values = Iota(12, 1);
  HostTensor source = CompactTensor(kF32, {3, 4}, FloatBytes(values));
  absl::StatusOr<TensorInfo> put = client().Put(name, source.dl());
  ASSERT_TRUE(put.ok()) << put.status();

  HostTensor destination = CompactTensor(kF32, {3, 4}, std::vector<uint8_t>(48, 0xEE));
  absl::StatusOr<TensorInfo> info = client().FetchInto(name, destination.dl());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->version, put->version);
  EXPECT_EQ(info->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(BytesEqual(destination.storage.data(), destination.storage.size(), source.storage));
}

TEST_P(PutFetchTest, FetchIntoStridedDestinations) {
  const std::string name = TestTensorName("t");
  const std::vector<float> values = Iota(12, 1);
  HostTensor source = CompactTensor(kF32, {3, 4}, FloatBytes(values));
  ASSERT_TRUE(client().Put(name, source.dl()).ok());

  {
    SCOPED_TRACE("column-major destination");
    std::vector<float> buffer(12, -1);
    HostTensor destination;
    destination.dtype = kF32;
    destination.shape = {3, 4};
    destination.strides = {1, 3};
    destination.storage = FloatBytes(buffer);
    absl::StatusOr<TensorInfo> info = client().FetchInto(name, destination.dl());
    ASSERT_TRUE(info.ok()) << info.status();
    std::memcpy(buffer.data(), destination.storage.data(), 48);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 4; ++j) EXPECT_EQ(buffer[j * 3 + i], values[i * 4 + j]) << i << "," << j;
    }
  }
  {
    SCOPED_TRACE("padded rows after a byte_offset");
    // Rows of 6 floats, 2 floats of header: elements outside the view stay.
    const float kUntouched = -7.5f;
    std::vector<float> buffer(2 + 3 * 6, kUntouched);
    HostTensor destination;
    destination.dtype = kF32;
    destination.shape = {3, 4};
    destination.strides = {6, 1};
    destination.byte_offset = 2 * sizeof(float);
    destination.storage = FloatBytes(buffer);
    absl::StatusOr<TensorInfo> info = client().FetchInto(name, destination.dl());
    ASSERT_TRUE(info.ok()) << info.status();
    std::memcpy(buffer.data(), destination.storage.data(), buffer.size() * sizeof(float));
    for (size_t k = 0; k < buffer.size(); ++k) {
      const bool inside = k >= 2 && (k - 2) % 6 < 4;
      const float expected = inside ? values[((k - 2) / 6) * 4 + (k - 2) % 6] : kUntouched;
      EXPECT_EQ(buffer[k], expected) << "float " << k;
    }
  }
}

TEST_P(PutFetchTest, FetchIntoRejectsAnotherDtypeOrShape) {
  const std::string name = TestTensorName("t");
  HostTensor source = CompactTensor(kF32, {3, 4}, FloatBytes(Iota(12)));
  ASSERT_TRUE(client().Put(name, source.dl()).ok());

  HostTensor wrong_shape = CompactTensor(kF32, {4, 3}, std::vector<uint8_t>(48, 0xEE));
  absl::StatusOr<TensorInfo> info = client().FetchInto(name, wrong_shape.dl());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << info.status();
  EXPECT_TRUE(MessageMentions(info.status(), "3,4"));
  EXPECT_TRUE(MessageMentions(info.status(), "4,3"));
  EXPECT_TRUE(BytesEqual(wrong_shape.storage.data(), 48, std::vector<uint8_t>(48, 0xEE)))
      << "a rejected FetchInto must not write";

  HostTensor wrong_dtype = CompactTensor(kI32, {3, 4}, std::vector<uint8_t>(48, 0xEE));
  info = client().FetchInto(name, wrong_dtype.dl());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << info.status();
  EXPECT_TRUE(MessageMentions(info.status(), "float32"));
  EXPECT_TRUE(MessageMentions(info.status(), "int32"));
}

TEST_P(PutFetchTest, TensorStoredWithStridesAndByteOffset) {
  // Put through the wire directly: float32[2,3] column-major after 8 bytes.
  const std::string name = TestTensorName("t");
  std::vector<float> stored = {-1, -2, 0, 3, 1, 4, 2, 5};  // [i][j] at 2 + j*2 + i
  std::unique_ptr<RawStub> stub = NewRawStub(server().address());
  ASSERT_TRUE(RawPut(*stub, {HeaderMessage(name, RawDataType(2, 32), {2, 3}, 32, {1, 2}, 8),
                             ChunkMessage(0, AsString(FloatBytes(stored)))})
                  .ok());

  absl::StatusOr<Tensor> fetched = client().Fetch(name);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  const DLTensor& dl = fetched->dl_tensor();
  EXPECT_EQ(dl.byte_offset, 0u) << "data must point at element [0,0]";
  EXPECT_EQ(StridesOf(dl), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(fetched->data_bytes(), 24u);
  const auto* data = static_cast<const float*>(dl.data);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(data[i * dl.strides[0] + j * dl.strides[1]], i * 3 + j);
  }

  HostTensor compact = CompactTensor(kF32, {2, 3}, std::vector<uint8_t>(24, 0));
  ASSERT_TRUE(client().FetchInto(name, compact.dl()).ok());
  EXPECT_TRUE(BytesEqual(compact.storage.data(), 24, FloatBytes({0, 1, 2, 3, 4, 5})));
}

TEST_P(PutFetchTest, FetchBytesOfARange) {
  const std::string name = TestTensorName("t");
  const std::vector<uint8_t> bytes = PatternBytes(5000, 9);
  HostTensor tensor = CompactTensor(kU8, {5000}, bytes);
  absl::StatusOr<TensorInfo> put = client().Put(name, tensor.dl());
  ASSERT_TRUE(put.ok()) << put.status();

  std::string out = "kept";
  absl::StatusOr<TensorInfo> info = client().FetchBytes(name, 1000, 2500, out);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->version, put->version);
  EXPECT_EQ(info->total_bytes, 5000u);
  ASSERT_EQ(out.size(), 4u + 2500u) << "FetchBytes appends";
  EXPECT_EQ(out.substr(0, 4), "kept");
  EXPECT_TRUE(BytesEqual(out.data() + 4, 2500, bytes.data() + 1000, 2500));

  out.clear();
  ASSERT_TRUE(client().FetchBytes(name, 4000, 0, out).ok());
  EXPECT_TRUE(BytesEqual(out.data(), out.size(), bytes.data() + 4000, 1000))
      << "length 0: to the end";

  out.clear();
  absl::Status beyond = client().FetchBytes(name, 4000, 1001, out).status();
  EXPECT_TRUE(StatusIs(beyond, absl::StatusCode::kOutOfRange, "1001")) << beyond;
  beyond = client().FetchBytes(name, 5001, 0, out).status();
  EXPECT_TRUE(StatusIs(beyond, absl::StatusCode::kOutOfRange, "5001")) << beyond;
}

TEST_P(PutFetchTest, Crc32cChecksAndProgress) {
  const std::string name = TestTensorName("t");
  const size_t size = 3 << 20;  // several chunks
  HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, 12));

  std::vector<std::pair<uint64_t, uint64_t>> put_progress;
  PutOptions put_options;
  put_options.send_crc32c = true;
  put_options.progress = [&](uint64_t done, uint64_t total) {
    put_progress.emplace_back(done, total);
  };
  absl::StatusOr<TensorInfo> put = client().Put(name, tensor.dl(), put_options);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->crc32c, Crc32c(tensor.storage.data(), size));

  std::vector<std::pair<uint64_t, uint64_t>> fetch_progress;
  FetchOptions fetch_options;
  fetch_options.verify_crc32c = true;
  fetch_options.progress = [&](uint64_t done, uint64_t total) {
    fetch_progress.emplace_back(done, total);
  };
  absl::StatusOr<Tensor> fetched = client().Fetch(name, fetch_options);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  std::vector<uint8_t> bytes = TensorBytes(*fetched);
  EXPECT_TRUE(BytesEqual(bytes.data(), bytes.size(), tensor.storage));

  for (const auto* progress : {&put_progress, &fetch_progress}) {
    ASSERT_FALSE(progress->empty()) << "progress is reported";
    uint64_t last = 0;
    for (const auto& [done, total] : *progress) {
      EXPECT_GE(done, last) << "progress never goes back";
      EXPECT_EQ(total, size);
      last = done;
    }
    EXPECT_EQ(last, size) << "the last report covers every byte";
  }
}

TEST_P(PutFetchTest, FetchBySpecificVersion) {
  const std::string name = TestTensorName("t");
  HostTensor one = CompactTensor(kU8, {4}, {1, 1, 1, 1});
  HostTensor two = CompactTensor(kU8, {3}, {2, 2, 2});
  absl::StatusOr<TensorInfo> first = client().Put(name, one.dl());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<TensorInfo> second = client().Put(name, two.dl());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->version, first->version);

  FetchOptions options;
  options.version = second->version;
  absl::StatusOr<Tensor> fetched = client().Fetch(name, options);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(TensorBytes(*fetched), two.storage);

  // Nobody holds the superseded version, so it is gone.
  options.version = first->version;
  absl::Status gone = client().Fetch(name, options).status();
  EXPECT_TRUE(StatusIs(gone, absl::StatusCode::kNotFound, absl::StrCat(first->version)));
  gone = client().Stat(name, first->version).status();
  EXPECT_TRUE(StatusIs(gone, absl::StatusCode::kNotFound, absl::StrCat(first->version)));
}

INSTANTIATE_TEST_SUITE_P(Transports, PutFetchTest, kBothTransports, TransportParamName);

// One tensor of 256 MiB, on TCP only to keep the suite's runtime down.
class LargeTensorTest : public ClientServerTest<LargeTensorTest> {};

TEST_P(LargeTensorTest, QuarterGibibyteRoundTrip) {
  const std::string name = TestTensorName("large");
  const size_t words = (size_t{256} << 20) / sizeof(uint64_t);
  HostTensor tensor;
  tensor.dtype = kU64;
  tensor.shape = {static_cast<int64_t>(words / 4096), 4096};
  tensor.storage.resize(words * sizeof(uint64_t));
  auto* data = reinterpret_cast<uint64_t*>(tensor.storage.data());
  for (size_t i = 0; i < words; ++i) data[i] = i * 0x9E3779B97F4A7C15ULL;

  absl::StatusOr<TensorInfo> put = client().Put(name, tensor.dl());
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->total_bytes, tensor.storage.size());

  absl::StatusOr<Tensor> fetched = client().Fetch(name);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->data_bytes(), tensor.storage.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(fetched->dl_tensor().data) % 256, 0u);
  EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), tensor.storage));

  // Free the server's copy now rather than at the end of the suite.
  EXPECT_TRUE(client().Delete(name).ok());
}

// Fetch's receive pool: a released tensor's buffer serves the next fetch
// that fits, and the reused buffer holds exactly the new tensor's bytes.
TEST_P(LargeTensorTest, AReleasedFetchBufferIsReusedWithTheNextTensorsBytesOnly) {
  const std::string first_name = TestTensorName("pool-a");
  const std::string second_name = TestTensorName("pool-b");
  constexpr int64_t kFirstBytes = 8 << 20;
  constexpr int64_t kSecondBytes = kFirstBytes - 4096;
  HostTensor first = CompactTensor(kU8, {kFirstBytes}, std::vector<uint8_t>(kFirstBytes, 0x11));
  HostTensor second = CompactTensor(kU8, {kSecondBytes}, std::vector<uint8_t>(kSecondBytes, 0x22));
  ASSERT_TRUE(client().Put(first_name, first.dl()).ok());
  ASSERT_TRUE(client().Put(second_name, second.dl()).ok());

  absl::StatusOr<Tensor> held = client().Fetch(first_name);
  ASSERT_TRUE(held.ok()) << held.status();
  const void* first_address = held->dl_tensor().data;
  absl::StatusOr<Tensor> alongside = client().Fetch(second_name);
  ASSERT_TRUE(alongside.ok()) << alongside.status();
  EXPECT_NE(alongside->dl_tensor().data, first_address) << "a held buffer is never handed out";
  *alongside = Tensor();
  *held = Tensor();  // both back in the pool

  absl::StatusOr<Tensor> reused = client().Fetch(second_name);
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_EQ(reused->data_bytes(), second.storage.size());
  EXPECT_TRUE(BytesEqual(reused->dl_tensor().data, reused->data_bytes(), second.storage));
  absl::StatusOr<Tensor> again = client().Fetch(first_name);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(BytesEqual(again->dl_tensor().data, again->data_bytes(), first.storage));
  EXPECT_TRUE(again->dl_tensor().data == first_address || reused->dl_tensor().data == first_address)
      << "one of the two fetches reuses the first buffer";
  EXPECT_TRUE(client().Delete(first_name).ok());
  EXPECT_TRUE(client().Delete(second_name).ok());
}

// A fetch in several streams: each part on its own connection, received
// into its place; the whole checked against the server's CRC-32C.
TEST_P(LargeTensorTest, AFetchInSeveralStreamsAssemblesEveryByteInPlace) {
  const std::string name = TestTensorName("streams");
  constexpr int64_t kBytes = (int64_t{48} << 20) + 12345;
  std::vector<uint8_t> bytes(kBytes);
  for (int64_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  HostTensor tensor = CompactTensor(kU8, {kBytes}, bytes);
  absl::StatusOr<TensorInfo> put = client().Put(name, tensor.dl());
  ASSERT_TRUE(put.ok()) << put.status();

  for (uint32_t streams : {2u, 3u}) {
    FetchOptions options;
    options.streams = streams;
    options.verify_crc32c = true;
    uint64_t last_progress = 0;
    bool monotonic = true;
    options.progress = [&](uint64_t done, uint64_t total) {
      monotonic = monotonic && done >= last_progress && total == static_cast<uint64_t>(kBytes);
      last_progress = done;
    };
    absl::StatusOr<Tensor> fetched = client().Fetch(name, options);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    EXPECT_EQ(fetched->info().version, put->version);
    EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), bytes)) << streams;
    EXPECT_TRUE(monotonic);
    EXPECT_EQ(last_progress, static_cast<uint64_t>(kBytes));

    HostTensor destination = CompactTensor(kU8, {kBytes}, std::vector<uint8_t>(kBytes, 0));
    absl::StatusOr<TensorInfo> landed = client().FetchInto(name, destination.dl(), options);
    ASSERT_TRUE(landed.ok()) << landed.status();
    EXPECT_TRUE(destination.storage == bytes) << streams;
  }
  FetchOptions too_many;
  too_many.streams = kMaxFetchStreams + 1;
  absl::StatusOr<Tensor> refused = client().Fetch(name, too_many);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_TRUE(client().Delete(name).ok());
}

// A put cut short by its deadline, in one stream or several, returns
// DEADLINE_EXCEEDED (not waiting forever for gRPC to give back chunks that
// point into the caller's memory) and publishes nothing, or else the whole.
TEST_P(LargeTensorTest, APutPastItsDeadlineReturnsAndPublishesNothing) {
  const std::string name = TestTensorName("put-deadline");
  constexpr int64_t kBytes = int64_t{64} << 20;
  HostTensor tensor = CompactTensor(kU8, {kBytes}, std::vector<uint8_t>(kBytes, 7));
  const uint32_t whole_crc32c = Crc32c(tensor.storage.data(), tensor.storage.size());
  // The server may have had every byte and the end of the stream before it
  // saw the deadline: then it published the whole tensor, which goes again.
  auto expect_nothing_or_the_whole = [&] {
    absl::StatusOr<TensorInfo> stored = this->client().Stat(name);
    if (stored.ok()) {
      EXPECT_EQ(stored->total_bytes, static_cast<uint64_t>(kBytes));
      EXPECT_EQ(stored->crc32c, whole_crc32c);
      EXPECT_TRUE(this->client().Delete(name).ok());
    } else {
      EXPECT_EQ(stored.status().code(), absl::StatusCode::kNotFound) << stored.status();
    }
  };
  ClientOptions hurried = RemoteClientOptions();
  hurried.timeout = absl::Milliseconds(15);
  std::unique_ptr<Client> client = ConnectClient(server().address(), hurried);
  ASSERT_NE(client, nullptr);
  int cut_short = 0;
  for (int attempt = 0; attempt < 6; ++attempt) {
    for (uint32_t streams : {1u, 4u}) {
      PutOptions options;
      options.streams = streams;
      absl::StatusOr<TensorInfo> put = client->Put(name, tensor.dl(), options);
      // A fast machine may finish in time; anything else is the deadline.
      if (put.ok()) {
        ASSERT_TRUE(this->client().Delete(name).ok());
        continue;
      }
      EXPECT_EQ(put.status().code(), absl::StatusCode::kDeadlineExceeded) << put.status();
      expect_nothing_or_the_whole();
      ++cut_short;
    }
    // A batch with a large item streams its chunks the same way.
    std::vector<BatchPutItem> batch = {{name, tensor.dl()}};
    absl::StatusOr<BatchPutResult> batched = client->BatchPut(batch);
    if (batched.ok()) {
      ASSERT_TRUE(this->client().Delete(name).ok() ||
                  this->client().Stat(name).status().code() == absl::StatusCode::kNotFound);
      continue;
    }
    EXPECT_EQ(batched.status().code(), absl::StatusCode::kDeadlineExceeded) << batched.status();
    expect_nothing_or_the_whole();
    ++cut_short;
  }
  // 64 MiB in 15 ms is beyond any loopback gRPC: most attempts were cut.
  EXPECT_GT(cut_short, 0);
}

// A put in several streams: each part on its own connection, written at its
// offset by the server, published as one version once all are in.
TEST_P(LargeTensorTest, APutInSeveralStreamsPublishesEveryByteAsOneVersion) {
  const std::string name = TestTensorName("put-streams");
  constexpr int64_t kBytes = (int64_t{48} << 20) + 12345;
  std::vector<uint8_t> bytes(kBytes);
  for (int64_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<uint8_t>((i * 2246822519u) >> 11);
  HostTensor tensor = CompactTensor(kU8, {kBytes}, bytes);
  uint64_t previous_version = 0;
  for (uint32_t streams : {2u, 3u}) {
    PutOptions options;
    options.streams = streams;
    options.send_crc32c = true;
    uint64_t last_progress = 0;
    bool monotonic = true;
    options.progress = [&](uint64_t done, uint64_t total) {
      monotonic = monotonic && done >= last_progress && total == static_cast<uint64_t>(kBytes);
      last_progress = done;
    };
    absl::StatusOr<TensorInfo> put = client().Put(name, tensor.dl(), options);
    ASSERT_TRUE(put.ok()) << put.status();
    EXPECT_GT(put->version, previous_version) << "one new version per put";
    previous_version = put->version;
    EXPECT_TRUE(monotonic);
    EXPECT_EQ(last_progress, static_cast<uint64_t>(kBytes));
    absl::StatusOr<Tensor> fetched = client().Fetch(name);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    EXPECT_EQ(fetched->info().version, put->version);
    EXPECT_EQ(fetched->info().crc32c, put->crc32c);
    EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), bytes)) << streams;
  }
  PutOptions too_many;
  too_many.streams = kMaxPutStreams + 1;
  EXPECT_TRUE(StatusIs(client().Put(name, tensor.dl(), too_many).status(),
                       absl::StatusCode::kInvalidArgument, "streams 9 is more than 8"));
  EXPECT_TRUE(client().Delete(name).ok());
}

INSTANTIATE_TEST_SUITE_P(Tcp, LargeTensorTest, ::testing::Values(Transport::kTcp),
                         TransportParamName);

}  // namespace
}  // namespace tensord::testing
