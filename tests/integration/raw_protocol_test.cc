// The wire protocol as a client that is not the C++ client sees it: well
// formed streams through the generated stub, and every malformed put, fetch,
// list and delete answered with the right code and a message naming the bad
// value, after which the server still serves and stored data is intact.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

using grpc::StatusCode;

class RawProtocolTest : public SharedServerTest<RawProtocolTest> {
 protected:
  void SetUp() override {
    SharedServerTest::SetUp();
    if (HasFatalFailure()) return;
    stub_ = NewRawStub(server().address());
  }

  void TearDown() override {
    if (stub_ != nullptr) ExpectServing();
    SharedServerTest::TearDown();
  }

  // After whatever the test sent, a put and a fetch still work.
  void ExpectServing() {
    const std::string name = TestTensorName("still-serving");
    const std::string bytes = AsString(PatternBytes(3000, 99));
    grpc::Status put = RawPutBytes(*stub_, name, bytes);
    ASSERT_TRUE(put.ok()) << "server stopped serving puts: " << put.error_message();
    v1::FetchRequest request;
    request.set_name(name);
    RawFetchResult fetched;
    grpc::Status fetch = RawFetch(*stub_, request, &fetched);
    ASSERT_TRUE(fetch.ok()) << "server stopped serving fetches: " << fetch.error_message();
    EXPECT_TRUE(BytesEqual(fetched.bytes.data(), fetched.bytes.size(), bytes.data(), bytes.size()));
  }

  void ExpectNotPublished(std::string_view name) {
    EXPECT_TRUE(GrpcStatusIs(RawStat(*stub_, name), StatusCode::NOT_FOUND, name))
        << "a failed put must publish nothing";
  }

  // A put of float32[2,3] whose header is fine; 24 bytes follow.
  v1::PutRequest GoodHeader(std::string_view name) {
    return HeaderMessage(name, RawDataType(2, 32), {2, 3}, 24);
  }

  std::unique_ptr<RawStub> stub_;
};

const std::string kBytes24 = AsString(PatternBytes(24, 24));

// ---- Well-formed streams ----

TEST_P(RawProtocolTest, PutThenFetchInBoundedChunksAtAbsoluteOffsets) {
  // Larger than the 32 KiB a header may carry inline.
  const std::string name = TestTensorName("t");
  const std::string bytes = AsString(PatternBytes(100'000, 1));
  v1::PutResponse put;
  ASSERT_TRUE(RawPutBytes(*stub_, name, bytes, &put, /*chunk_bytes=*/30'000).ok());
  EXPECT_EQ(put.info().name(), name);
  EXPECT_GT(put.info().version(), 0u);
  EXPECT_EQ(put.info().total_bytes(), bytes.size());
  EXPECT_EQ(put.info().crc32c(), Crc32c(bytes.data(), bytes.size()));
  // Fetch always fills the strides in.
  ASSERT_EQ(put.info().layout().strides_size(), 1);
  EXPECT_EQ(put.info().layout().strides(0), 1);
  const int64_t now = absl::ToUnixNanos(absl::Now());
  EXPECT_GT(put.info().created_unix_nanos(), now - int64_t{600} * 1'000'000'000);
  EXPECT_LE(put.info().created_unix_nanos(), now);

  v1::FetchRequest request;
  request.set_name(name);
  request.set_max_chunk_bytes(10'000);
  RawFetchResult fetched;
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_EQ(fetched.header.info().version(), put.info().version());
  EXPECT_EQ(fetched.header.range().offset(), 0u);
  EXPECT_EQ(fetched.header.range().length(), bytes.size());
  EXPECT_FALSE(fetched.inline_data);
  EXPECT_LE(fetched.largest_chunk, 10'000u);
  EXPECT_GE(fetched.chunks, 10u);
  EXPECT_TRUE(BytesEqual(fetched.bytes.data(), fetched.bytes.size(), bytes.data(), bytes.size()));
}

TEST_P(RawProtocolTest, FetchRangeStartsAtItsOffset) {
  const std::string name = TestTensorName("t");
  const std::string bytes = AsString(PatternBytes(200'000, 2));
  ASSERT_TRUE(RawPutBytes(*stub_, name, bytes).ok());
  v1::FetchRequest request;
  request.set_name(name);
  request.mutable_range()->set_offset(1234);
  request.mutable_range()->set_length(100'000);
  request.set_max_chunk_bytes(10'000);
  RawFetchResult fetched;
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_EQ(fetched.header.range().offset(), 1234u);
  EXPECT_EQ(fetched.header.range().length(), 100'000u);
  EXPECT_GE(fetched.chunks, 10u);
  EXPECT_TRUE(BytesEqual(fetched.bytes.data(), fetched.bytes.size(), bytes.data() + 1234, 100'000));

  // A small range may come inline in the header or as chunks: same bytes.
  request.mutable_range()->set_offset(777);
  request.mutable_range()->set_length(5000);
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_TRUE(BytesEqual(fetched.bytes.data(), fetched.bytes.size(), bytes.data() + 777, 5000));
  request.mutable_range()->set_offset(1234);

  // Length 0 means through the end; offset == size is an empty range.
  request.mutable_range()->set_length(0);
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_EQ(fetched.header.range().length(), bytes.size() - 1234);
  EXPECT_TRUE(BytesEqual(fetched.bytes.data(), fetched.bytes.size(), bytes.data() + 1234,
                         bytes.size() - 1234));
  request.mutable_range()->set_offset(bytes.size());
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_EQ(fetched.bytes.size(), 0u);
}

// split_above_bytes: a longer range is answered with its header alone,
// marked split, naming the version; a range within it streams as usual.
TEST_P(RawProtocolTest, ARangeLongerThanSplitAboveBytesIsAnsweredWithASplitHeader) {
  const std::string name = TestTensorName("split");
  const std::string bytes = AsString(PatternBytes(300'000, 3));
  v1::PutResponse put;
  ASSERT_TRUE(RawPutBytes(*stub_, name, bytes, &put).ok());
  v1::FetchRequest request;
  request.set_name(name);
  request.set_split_above_bytes(100'000);
  RawFetchResult fetched;
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_TRUE(fetched.header.split());
  EXPECT_EQ(fetched.header.info().version(), put.info().version());
  EXPECT_EQ(fetched.header.range().offset(), 0u);
  EXPECT_EQ(fetched.header.range().length(), bytes.size());
  EXPECT_EQ(fetched.bytes.size(), 0u);

  request.mutable_range()->set_offset(250'000);  // 50,000 bytes: under the bound
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_FALSE(fetched.header.split());
  EXPECT_TRUE(
      BytesEqual(fetched.bytes.data(), fetched.bytes.size(), bytes.data() + 250'000, 50'000));
}

// FetchInline: a range the server inlines comes back in one unary answer;
// a longer one is a split header naming the version, with no bytes.
TEST_P(RawProtocolTest, FetchInlineCarriesSmallRangesAndSplitsLongerOnes) {
  const std::string name = TestTensorName("inline");
  const std::string bytes = AsString(PatternBytes(100'000, 4));
  v1::PutResponse put;
  ASSERT_TRUE(RawPutBytes(*stub_, name, bytes, &put).ok());
  v1::FetchRequest request;
  request.set_name(name);
  request.mutable_range()->set_offset(5000);
  request.mutable_range()->set_length(20'000);
  v1::FetchResponse answer;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->FetchInline(&context, request, &answer).ok());
  }
  ASSERT_TRUE(answer.has_header());
  EXPECT_FALSE(answer.header().split());
  EXPECT_EQ(answer.header().info().version(), put.info().version());
  EXPECT_EQ(answer.header().inline_data(), bytes.substr(5000, 20'000));

  request.clear_range();  // 100,000 bytes: beyond what the server inlines
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->FetchInline(&context, request, &answer).ok());
  }
  EXPECT_TRUE(answer.header().split());
  EXPECT_FALSE(answer.header().has_inline_data());
  EXPECT_EQ(answer.header().range().length(), bytes.size());
  EXPECT_EQ(answer.header().info().crc32c(), put.info().crc32c());

  request.set_name(name + "-missing");
  grpc::ClientContext context;
  const grpc::Status missing = stub_->FetchInline(&context, request, &answer);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(missing.error_message().find(name + "-missing"), std::string::npos)
      << missing.error_message();
}

// FetchInline's request is parsed by tensord (the method is raw, so its
// answer can carry the bytes as a slice of their own): bytes that are not a
// FetchRequest get INVALID_ARGUMENT saying so, and the server goes on.
TEST_P(RawProtocolTest, FetchInlineRefusesBytesThatAreNotARequest) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(server().address(), grpc::InsecureChannelCredentials());
  const grpc::internal::RpcMethod method("/tensord.v1.TensorService/FetchInline",
                                         grpc::internal::RpcMethod::NORMAL_RPC, channel);
  const char truncated[] = {'\x0a', '\x7f', 'a'};  // name says 127 bytes, 1 follows
  grpc::Slice slice(truncated, sizeof(truncated));
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer answer;
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  const grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), method, context.get(), request, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("fetch request"), std::string::npos)
      << status.error_message();
}

TEST_P(RawProtocolTest, StridedLayoutWithByteOffsetIsStoredAsSent) {
  // float32[2,3] column-major (strides {1,2}) after 8 bytes of padding.
  const std::string name = TestTensorName("t");
  const std::string bytes = AsString(PatternBytes(32, 3));
  v1::PutResponse put;
  ASSERT_TRUE(RawPut(*stub_,
                     {HeaderMessage(name, RawDataType(2, 32), {2, 3}, 32, {1, 2}, 8),
                      ChunkMessage(0, bytes.substr(0, 20)), ChunkMessage(20, bytes.substr(20))},
                     &put)
                  .ok());
  v1::TensorInfo info;
  ASSERT_TRUE(RawStat(*stub_, name, 0, &info).ok());
  EXPECT_EQ(info.version(), put.info().version());
  EXPECT_EQ(info.total_bytes(), 32u);
  EXPECT_EQ(info.layout().byte_offset(), 8u);
  EXPECT_EQ(std::vector<int64_t>(info.layout().strides().begin(), info.layout().strides().end()),
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(std::vector<int64_t>(info.layout().shape().begin(), info.layout().shape().end()),
            (std::vector<int64_t>{2, 3}));
  v1::FetchRequest request;
  request.set_name(name);
  RawFetchResult fetched;
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_TRUE(BytesEqual(fetched.bytes.data(), fetched.bytes.size(), bytes.data(), bytes.size()));
}

TEST_P(RawProtocolTest, ZeroSizeTensorNeedsNoChunk) {
  const std::string name = TestTensorName("empty");
  v1::PutResponse put;
  ASSERT_TRUE(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {0, 5}, 0)}, &put).ok());
  EXPECT_EQ(put.info().total_bytes(), 0u);
  v1::FetchRequest request;
  request.set_name(name);
  RawFetchResult fetched;
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_EQ(fetched.chunks, 0u);
  EXPECT_EQ(fetched.header.info().layout().shape_size(), 2);
}

TEST_P(RawProtocolTest, VersionsIncreaseAcrossNames) {
  v1::PutResponse a, b, c;
  ASSERT_TRUE(RawPutBytes(*stub_, TestTensorName("a"), "x", &a).ok());
  ASSERT_TRUE(RawPutBytes(*stub_, TestTensorName("b"), "y", &b).ok());
  ASSERT_TRUE(RawPutBytes(*stub_, TestTensorName("a"), "z", &c).ok());
  EXPECT_LT(a.info().version(), b.info().version());
  EXPECT_LT(b.info().version(), c.info().version());
}

TEST_P(RawProtocolTest, MatchingCrc32cIsAcceptedAndWrongOneIsDataLoss) {
  const std::string name = TestTensorName("t");
  const uint32_t crc = Crc32c(kBytes24.data(), kBytes24.size());
  v1::PutRequest header = GoodHeader(name);
  header.mutable_header()->set_crc32c(crc);
  ASSERT_TRUE(RawPut(*stub_, {header, ChunkMessage(0, kBytes24)}).ok());

  const std::string other = TestTensorName("wrong");
  v1::PutRequest wrong = GoodHeader(other);
  wrong.mutable_header()->set_crc32c(crc ^ 1);
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {wrong, ChunkMessage(0, kBytes24)}),
                           StatusCode::DATA_LOSS, absl::StrCat(crc ^ 1)));
  ExpectNotPublished(other);
}

// ---- Bad headers ----

TEST_P(RawProtocolTest, UnknownDtypeCode) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(
      RawPut(*stub_, {HeaderMessage(name, RawDataType(99, 8), {4}, 4), ChunkMessage(0, "abcd")}),
      StatusCode::INVALID_ARGUMENT, "99"));
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(1000, 8), {4}, 4)}),
                           StatusCode::INVALID_ARGUMENT, "1000"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, BitsNotAllowedForTheCode) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 7), {8}, 7)}),
                           StatusCode::INVALID_ARGUMENT, "bits 7"));
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 0), {8}, 0)}),
                           StatusCode::INVALID_ARGUMENT, "bits 0"));
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(4, 32), {8}, 32)}),
                           StatusCode::INVALID_ARGUMENT, "bits 32"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, LanesOutOfRange) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(1, 8, 100), {1}, 100)}),
                           StatusCode::INVALID_ARGUMENT, "lanes 100"));
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(1, 8, 70000), {1}, 70000)}),
                   StatusCode::INVALID_ARGUMENT, "70000"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, MissingDtype) {
  const std::string name = TestTensorName("t");
  v1::PutRequest header = HeaderMessage(name, RawDataType(2, 32), {1}, 4);
  header.mutable_header()->mutable_layout()->clear_dtype();
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {header}), StatusCode::INVALID_ARGUMENT, "dtype"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, NegativeShape) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {3, -2}, 24)}),
                           StatusCode::INVALID_ARGUMENT, "-2"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, TooManyDimensions) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(
      RawPut(*stub_, {HeaderMessage(name, RawDataType(1, 8), std::vector<int64_t>(33, 1), 1)}),
      StatusCode::INVALID_ARGUMENT, "33"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, ShapeWhoseSizeOverflows) {
  const std::string name = TestTensorName("t");
  const int64_t huge = int64_t{1} << 62;
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {huge, huge}, 0)}),
                   StatusCode::INVALID_ARGUMENT, "overflows"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, StridesCountMismatch) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {2, 3}, 24, {1})}),
                   StatusCode::INVALID_ARGUMENT, "strides has 1"));
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {2, 3}, 24, {3, 1, 1})}),
                   StatusCode::INVALID_ARGUMENT, "strides has 3"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, NegativeStridesReachingBeforeTheBuffer) {
  const std::string name = TestTensorName("t");
  // Row 1 of a float32[2,3] at stride -3 lies 12 bytes before element 0.
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {2, 3}, 12, {-3, 1}),
                                   ChunkMessage(0, kBytes24.substr(0, 12))}),
                   StatusCode::INVALID_ARGUMENT, "-3"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, StridesWhoseExtentOverflows) {
  const std::string name = TestTensorName("t");
  const int64_t stride = std::numeric_limits<int64_t>::max() / 2 + 1;
  EXPECT_TRUE(GrpcStatusIs(
      RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {3, 2}, 24, {stride, 1})}),
      StatusCode::INVALID_ARGUMENT, absl::StrCat(stride)));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, TotalBytesMismatch) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {2, 3}, 23),
                                           ChunkMessage(0, kBytes24.substr(0, 23))}),
                           StatusCode::INVALID_ARGUMENT, "total_bytes 23"));
  // Strides reaching past total_bytes: the strided extent is 24 + 40 bytes.
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(2, 32), {2, 3}, 24, {13, 1}),
                                   ChunkMessage(0, kBytes24)}),
                   StatusCode::INVALID_ARGUMENT, "total_bytes 24"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, SubByteTensorsMustBeCompactFromByteZero) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(0, 4), {2, 4}, 4, {1, 2})}),
                   StatusCode::INVALID_ARGUMENT, "int4"));
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {HeaderMessage(name, RawDataType(17, 4), {2, 4}, 5, {}, 1)}),
                   StatusCode::INVALID_ARGUMENT, "byte_offset must be 0, not 1"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, HugeTensorIsRefusedBeforeAnyAllocation) {
  const std::string name = TestTensorName("t");
  const uint64_t bytes = uint64_t{1} << 40;
  EXPECT_TRUE(GrpcStatusIs(
      RawPut(*stub_, {HeaderMessage(name, RawDataType(1, 8), {static_cast<int64_t>(bytes)}, bytes),
                      ChunkMessage(0, "abcd")}),
      StatusCode::RESOURCE_EXHAUSTED, absl::StrCat(bytes)));
  ExpectNotPublished(name);
}

// ---- Bad chunk sequences ----

TEST_P(RawProtocolTest, ChunkOutOfOrder) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {GoodHeader(name), ChunkMessage(8, kBytes24.substr(8)),
                                           ChunkMessage(0, kBytes24.substr(0, 8))}),
                           StatusCode::INVALID_ARGUMENT, "offset 8"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, OverlappingChunks) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {GoodHeader(name), ChunkMessage(0, kBytes24.substr(0, 16)),
                                   ChunkMessage(8, kBytes24.substr(8))}),
                   StatusCode::INVALID_ARGUMENT, "offset 8"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, MoreBytesThanTotalBytes) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {GoodHeader(name), ChunkMessage(0, kBytes24.substr(0, 16)),
                                   ChunkMessage(16, kBytes24.substr(0, 16))}),
                   StatusCode::INVALID_ARGUMENT, "total_bytes 24"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, FewerBytesThanTotalBytes) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(
      GrpcStatusIs(RawPut(*stub_, {GoodHeader(name), ChunkMessage(0, kBytes24.substr(0, 16))}),
                   StatusCode::INVALID_ARGUMENT, "16 of 24"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, ChunkBeforeHeader) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {ChunkMessage(0, kBytes24), GoodHeader(name)}),
                           StatusCode::INVALID_ARGUMENT, "before its header"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, SecondHeader) {
  const std::string name = TestTensorName("t");
  EXPECT_TRUE(GrpcStatusIs(
      RawPut(*stub_, {GoodHeader(name), ChunkMessage(0, kBytes24.substr(0, 8)), GoodHeader(name)}),
      StatusCode::INVALID_ARGUMENT, "second header"));
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, StreamWithoutHeader) {
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {}), StatusCode::INVALID_ARGUMENT, "header"));
  EXPECT_TRUE(GrpcStatusIs(RawPut(*stub_, {v1::PutRequest()}), StatusCode::INVALID_ARGUMENT,
                           "neither a header nor a chunk"));
}

TEST_P(RawProtocolTest, InterruptedPutPublishesNothing) {
  const std::string name = TestTensorName("t");
  grpc::Status status = RawPut(*stub_, {GoodHeader(name), ChunkMessage(0, kBytes24.substr(0, 8))},
                               nullptr, /*writes_done=*/false);
  EXPECT_EQ(status.error_code(), StatusCode::CANCELLED) << status.error_message();
  ExpectNotPublished(name);
}

TEST_P(RawProtocolTest, FailedPutLeavesThePublishedVersionIntact) {
  const std::string name = TestTensorName("t");
  v1::PutResponse first;
  ASSERT_TRUE(RawPut(*stub_, {GoodHeader(name), ChunkMessage(0, kBytes24)}, &first).ok());
  const std::string other = AsString(PatternBytes(24, 777));
  EXPECT_FALSE(RawPut(*stub_, {GoodHeader(name), ChunkMessage(0, other.substr(0, 16))}).ok());
  EXPECT_FALSE(RawPut(*stub_, {GoodHeader(name), ChunkMessage(0, other.substr(0, 16))}, nullptr,
                      /*writes_done=*/false)
                   .ok());
  v1::TensorInfo info;
  ASSERT_TRUE(RawStat(*stub_, name, 0, &info).ok());
  EXPECT_EQ(info.version(), first.info().version());
  v1::FetchRequest request;
  request.set_name(name);
  RawFetchResult fetched;
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_TRUE(BytesEqual(fetched.bytes.data(), fetched.bytes.size(), kBytes24.data(), 24));
}

// ---- Names ----

TEST_P(RawProtocolTest, InvalidNamesAreRejectedByEveryCall) {
  const std::string long_name(300, 'x');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty"},      {"../x", "'../x'"},   {"a b", "'a b'"},       {"/abs", "'/abs'"},
      {"a//b", "'a//b'"}, {"a/./b", "'a/./b'"}, {long_name, long_name},
  };
  for (const auto& [name, expected] : cases) {
    SCOPED_TRACE(absl::StrCat("name '", name, "'"));
    EXPECT_TRUE(GrpcStatusIs(
        RawPut(*stub_, {HeaderMessage(name, RawDataType(1, 8), {3}, 3), ChunkMessage(0, "abc")}),
        StatusCode::INVALID_ARGUMENT, expected));
    EXPECT_TRUE(GrpcStatusIs(RawStat(*stub_, name), StatusCode::INVALID_ARGUMENT, expected));
    v1::FetchRequest fetch;
    fetch.set_name(name);
    EXPECT_TRUE(
        GrpcStatusIs(RawFetch(*stub_, fetch, nullptr), StatusCode::INVALID_ARGUMENT, expected));
    v1::DeleteRequest remove;
    remove.set_name(name);
    v1::DeleteResponse removed;
    EXPECT_TRUE(GrpcStatusIs(stub_->Delete(RawContext().get(), remove, &removed),
                             StatusCode::INVALID_ARGUMENT, expected));
  }
  // The longest allowed name works.
  EXPECT_TRUE(RawPutBytes(*stub_, std::string(256, 'n'), "ok").ok());
}

// ---- Fetch, List, Delete ----

TEST_P(RawProtocolTest, FetchRangeBeyondTheEnd) {
  const std::string name = TestTensorName("t");
  ASSERT_TRUE(RawPutBytes(*stub_, name, AsString(PatternBytes(1000, 5))).ok());
  v1::FetchRequest request;
  request.set_name(name);
  request.mutable_range()->set_offset(1001);
  EXPECT_TRUE(GrpcStatusIs(RawFetch(*stub_, request, nullptr), StatusCode::OUT_OF_RANGE, "1001"));
  request.mutable_range()->set_offset(900);
  request.mutable_range()->set_length(101);
  EXPECT_TRUE(GrpcStatusIs(RawFetch(*stub_, request, nullptr), StatusCode::OUT_OF_RANGE, "101"));
  request.mutable_range()->set_offset(1);
  request.mutable_range()->set_length(std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(GrpcStatusIs(RawFetch(*stub_, request, nullptr), StatusCode::OUT_OF_RANGE,
                           absl::StrCat(std::numeric_limits<uint64_t>::max())));
}

TEST_P(RawProtocolTest, FetchOfMissingNameOrVersion) {
  const std::string name = TestTensorName("t");
  v1::FetchRequest request;
  request.set_name(name);
  EXPECT_TRUE(GrpcStatusIs(RawFetch(*stub_, request, nullptr), StatusCode::NOT_FOUND, name));
  v1::PutResponse put;
  ASSERT_TRUE(RawPutBytes(*stub_, name, "abc", &put).ok());
  const uint64_t missing = put.info().version() + 1000;
  request.set_version(missing);
  EXPECT_TRUE(GrpcStatusIs(RawFetch(*stub_, request, nullptr), StatusCode::NOT_FOUND,
                           absl::StrCat(missing)));
  EXPECT_TRUE(
      GrpcStatusIs(RawStat(*stub_, name, missing), StatusCode::NOT_FOUND, absl::StrCat(missing)));
}

TEST_P(RawProtocolTest, ListRejectsBadPageTokenAndPageSize) {
  v1::ListRequest request;
  request.set_page_token("not-a-token!");
  v1::ListResponse response;
  EXPECT_TRUE(GrpcStatusIs(stub_->List(RawContext().get(), request, &response),
                           StatusCode::INVALID_ARGUMENT, "not-a-token!"));
  request.clear_page_token();
  request.set_page_size(5000);
  EXPECT_TRUE(GrpcStatusIs(stub_->List(RawContext().get(), request, &response),
                           StatusCode::INVALID_ARGUMENT, "5000"));
  request.set_page_size(1000);
  EXPECT_TRUE(stub_->List(RawContext().get(), request, &response).ok());
  request.set_prefix("a b");
  EXPECT_TRUE(GrpcStatusIs(stub_->List(RawContext().get(), request, &response),
                           StatusCode::INVALID_ARGUMENT, "'a b'"));
}

TEST_P(RawProtocolTest, DeleteWithStaleVersionFailsAndKeepsTheTensor) {
  const std::string name = TestTensorName("t");
  v1::PutResponse first, second;
  ASSERT_TRUE(RawPutBytes(*stub_, name, "one", &first).ok());
  ASSERT_TRUE(RawPutBytes(*stub_, name, "two", &second).ok());
  v1::DeleteRequest request;
  request.set_name(name);
  request.set_version(first.info().version());
  v1::DeleteResponse response;
  EXPECT_TRUE(GrpcStatusIs(stub_->Delete(RawContext().get(), request, &response),
                           StatusCode::FAILED_PRECONDITION, absl::StrCat(first.info().version())));
  v1::TensorInfo info;
  ASSERT_TRUE(RawStat(*stub_, name, 0, &info).ok());
  EXPECT_EQ(info.version(), second.info().version());

  request.set_version(second.info().version());
  ASSERT_TRUE(stub_->Delete(RawContext().get(), request, &response).ok());
  EXPECT_EQ(response.version(), second.info().version());
  EXPECT_TRUE(GrpcStatusIs(RawStat(*stub_, name), StatusCode::NOT_FOUND, name));
  EXPECT_TRUE(GrpcStatusIs(stub_->Delete(RawContext().get(), request, &response),
                           StatusCode::NOT_FOUND, name));
}

TEST_P(RawProtocolTest, OlderVersionStaysFetchableWhileAReaderHoldsIt) {
  const std::string name = TestTensorName("t");
  const std::string old_bytes = AsString(PatternBytes(8 << 20, 11));
  v1::PutResponse old_put, new_put;
  ASSERT_TRUE(RawPutBytes(*stub_, name, old_bytes, &old_put).ok());
  const uint64_t old_version = old_put.info().version();

  // A reader that takes the header and then stalls: flow control keeps the
  // server from finishing 8 MiB in 16 KiB chunks, so its lease stays open.
  std::unique_ptr<RawStub> stalled = NewRawStub(server().address(), /*small_window=*/true);
  auto context = RawContext();
  v1::FetchRequest request;
  request.set_name(name);
  request.set_max_chunk_bytes(16 << 10);
  auto reader = stalled->Fetch(context.get(), request);
  v1::FetchResponse first;
  ASSERT_TRUE(reader->Read(&first));
  ASSERT_TRUE(first.has_header());
  EXPECT_EQ(first.header().info().version(), old_version);

  ASSERT_TRUE(RawPutBytes(*stub_, name, "new", &new_put).ok());
  v1::TensorInfo info;
  ASSERT_TRUE(RawStat(*stub_, name, old_version, &info).ok())
      << "a superseded version with an open lease must stay readable";
  EXPECT_GE(info.open_leases(), 1u);
  v1::FetchRequest by_version;
  by_version.set_name(name);
  by_version.set_version(old_version);
  RawFetchResult fetched;
  ASSERT_TRUE(RawFetch(*stub_, by_version, &fetched).ok());
  EXPECT_TRUE(
      BytesEqual(fetched.bytes.data(), fetched.bytes.size(), old_bytes.data(), old_bytes.size()));

  // The stalled reader still gets the old bytes intact.
  std::string streamed;
  v1::FetchResponse response;
  while (reader->Read(&response)) streamed += response.chunk().data();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(BytesEqual(streamed.data(), streamed.size(), old_bytes.data(), old_bytes.size()));

  // Once every reader is done the old version goes (gRPC may release the
  // last chunk slices a little after the call ends).
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  grpc::Status status;
  do {
    status = RawStat(*stub_, name, old_version);
    if (!status.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < deadline);
  EXPECT_TRUE(GrpcStatusIs(status, StatusCode::NOT_FOUND, absl::StrCat(old_version)));
}

INSTANTIATE_TEST_SUITE_P(Transports, RawProtocolTest, kBothTransports, TransportParamName);

}  // namespace
}  // namespace tensord::testing
