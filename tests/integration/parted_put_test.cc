// A put in several streams (PutHeader.part) as the wire sees it: parts in
// any order publish one version once all are in, with every part's call
// answering with it; any bad, short or failed part fails the whole put
// (the others answer ABORTED), publishes nothing and frees its bytes.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

using grpc::StatusCode;

constexpr uint64_t kTotal = 3 << 20;  // a memfd of its own (above the arena's 1 MiB)

struct PartSpec {
  uint64_t offset = 0;
  uint64_t length = 0;
};

class PartedPutTest : public SharedServerTest<PartedPutTest> {
 protected:
  void SetUp() override {
    SharedServerTest::SetUp();
    if (HasFatalFailure()) return;
    stub_ = NewRawStub(server().address());
    bytes_ = AsString(PatternBytes(kTotal, 41));
  }

  // One part of this test's put of bytes_.
  std::vector<v1::PutRequest> Part(std::string_view name, uint32_t parts, PartSpec part,
                                   uint64_t short_by = 0) {
    return PartMessages(name, bytes_, upload_, parts, part.offset, part.length, short_by);
  }

  // Sends a part on its own thread (its call ends only with the put).
  std::future<std::pair<grpc::Status, v1::PutResponse>> SendPart(
      std::vector<v1::PutRequest> messages, bool writes_done = true) {
    return std::async(std::launch::async, [this, messages = std::move(messages), writes_done] {
      v1::PutResponse response;
      grpc::Status status = RawPutPart(*stub_, messages, &response, writes_done);
      return std::make_pair(status, response);
    });
  }

  uint64_t HostBytesUsed() {
    v1::GetServerInfoResponse info;
    std::unique_ptr<grpc::ClientContext> context = RawContext();
    return stub_->GetServerInfo(context.get(), {}, &info).ok() ? info.host_bytes_used()
                                                               : ~uint64_t{0};
  }

  void ExpectNothingPublishedOrHeld(std::string_view name, uint64_t bytes_before) {
    EXPECT_TRUE(GrpcStatusIs(RawStat(*stub_, name), StatusCode::NOT_FOUND, name))
        << "a failed put in parts must publish nothing";
    EXPECT_TRUE(WaitUntil([&] { return HostBytesUsed() == bytes_before; }, absl::Seconds(30)))
        << "the failed put still holds its bytes: " << HostBytesUsed() << " used, " << bytes_before
        << " before";
  }

  // Sends the put's first part and returns once the server has joined it
  // (its bytes are reserved), so the parts after it find its put.
  std::future<std::pair<grpc::Status, v1::PutResponse>> SendFirstPart(
      std::vector<v1::PutRequest> messages, uint64_t bytes_before) {
    auto sent = SendPart(std::move(messages));
    EXPECT_TRUE(
        WaitUntil([&] { return HostBytesUsed() >= bytes_before + kTotal; }, absl::Seconds(30)))
        << "the first part never reserved the put's bytes";
    return sent;
  }

  // A new upload id per put, as a client draws one.
  static std::string NewUploadId() {
    static std::atomic<uint64_t> next{1};
    return absl::StrFormat("%016x%016x", static_cast<uint64_t>(::getpid()), next++);
  }

  std::unique_ptr<RawStub> stub_;
  std::string bytes_;
  const std::string upload_ = NewUploadId();
};

constexpr char kUpload[] = "0123456789abcdef0123456789abcdef";

TEST_P(PartedPutTest, PartsInAnyOrderPublishOneVersionEveryPartAnswersWith) {
  const std::string name = TestTensorName("parts");
  // Three parts, the last sent first; the header carries the whole's CRC.
  const std::vector<PartSpec> parts = {{0, 1 << 20}, {1 << 20, 1 << 20}, {2 << 20, 1 << 20}};
  std::vector<std::future<std::pair<grpc::Status, v1::PutResponse>>> sent;
  for (int i = 2; i >= 0; --i) {
    std::vector<v1::PutRequest> messages = Part(name, 3, parts[i]);
    messages[0].mutable_header()->set_crc32c(Crc32c(bytes_.data(), bytes_.size()));
    sent.push_back(SendPart(std::move(messages)));
  }
  uint64_t version = 0;
  for (auto& part : sent) {
    auto [status, response] = part.get();
    ASSERT_TRUE(status.ok()) << status.error_message();
    if (version == 0) version = response.info().version();
    EXPECT_EQ(response.info().version(), version) << "every part answers with the one version";
    EXPECT_EQ(response.info().total_bytes(), kTotal);
    EXPECT_EQ(response.info().crc32c(), Crc32c(bytes_.data(), bytes_.size()));
  }
  v1::FetchRequest request;
  request.set_name(name);
  RawFetchResult fetched;
  ASSERT_TRUE(RawFetch(*stub_, request, &fetched).ok());
  EXPECT_EQ(fetched.header.info().version(), version);
  EXPECT_TRUE(fetched.bytes == bytes_);
  // A part sent again after the put was published publishes nothing more.
  grpc::Status late = RawPutPart(*stub_, Part(name, 3, parts[0]));
  EXPECT_TRUE(GrpcStatusIs(late, StatusCode::INVALID_ARGUMENT, "was published"))
      << late.error_message();
  v1::TensorInfo info;
  ASSERT_TRUE(RawStat(*stub_, name, 0, &info).ok());
  EXPECT_EQ(info.version(), version);
}

TEST_P(PartedPutTest, AnOverlappingPartFailsThePutAndTheWaitingPartAnswersAborted) {
  const std::string name = TestTensorName("overlap");
  const uint64_t before = HostBytesUsed();
  auto first = SendFirstPart(Part(name, 2, {0, 2 << 20}), before);
  v1::PutResponse response;
  grpc::Status overlapping = RawPutPart(*stub_, Part(name, 2, {1 << 20, 2 << 20}), &response);
  EXPECT_TRUE(
      GrpcStatusIs(overlapping, StatusCode::INVALID_ARGUMENT, "overlaps part [0, +2097152)"))
      << overlapping.error_message();
  grpc::Status waiting = first.get().first;
  EXPECT_TRUE(GrpcStatusIs(waiting, StatusCode::ABORTED, "nothing was published"))
      << waiting.error_message();
  ExpectNothingPublishedOrHeld(name, before);
  // A late part of the failed put is answered with its failure at once,
  // instead of starting a put that could never complete.
  grpc::Status late = RawPutPart(*stub_, Part(name, 2, {2 << 20, 1 << 20}));
  EXPECT_TRUE(GrpcStatusIs(late, StatusCode::ABORTED, "overlaps")) << late.error_message();
  ExpectNothingPublishedOrHeld(name, before);
}

TEST_P(PartedPutTest, AShortPartFailsThePutAndFreesItsBytes) {
  const std::string name = TestTensorName("short");
  const uint64_t before = HostBytesUsed();
  auto whole = SendFirstPart(Part(name, 2, {0, 1 << 20}), before);
  auto short_part = SendPart(Part(name, 2, {1 << 20, 2 << 20}, 7));
  grpc::Status cut = short_part.get().first;
  EXPECT_TRUE(GrpcStatusIs(cut, StatusCode::INVALID_ARGUMENT, "ended after 2097145 of its bytes"))
      << cut.error_message();
  grpc::Status other = whole.get().first;
  EXPECT_TRUE(GrpcStatusIs(other, StatusCode::ABORTED, "ended after")) << other.error_message();
  ExpectNothingPublishedOrHeld(name, before);
}

TEST_P(PartedPutTest, ACancelledPartFailsThePut) {
  const std::string name = TestTensorName("cancelled");
  const uint64_t before = HostBytesUsed();
  auto whole = SendFirstPart(Part(name, 2, {0, 1 << 20}), before);
  // The other part on a channel whose window stays at 64 KiB: once its
  // writes of almost 2 MiB returned, the server has read its header (it
  // joined the put); then it is cancelled.
  std::unique_ptr<RawStub> narrow = NewRawStub(server().address(), /*small_window=*/true);
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  v1::PutResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PutRequest>> writer =
      narrow->PutPart(context.get(), &response);
  for (const v1::PutRequest& message : Part(name, 2, {1 << 20, 2 << 20}, 4096)) {
    ASSERT_TRUE(writer->Write(message));
  }
  // A put cancelled before the server read its header names nothing.
  auto nameless_cancels = [&] {
    return CountOccurrences(server().Stderr(), "event=put_failed name=\"\" ");
  };
  const size_t nameless_before = nameless_cancels();
  context->TryCancel();
  EXPECT_FALSE(writer->Finish().ok());
  grpc::Status other = whole.get().first;
  // The writes returning does not prove that the server's reactor read the
  // header: its transport may hold them all (CI, once, under load). A part
  // cancelled before then never joined the put, so the server cannot tell
  // the first part; that one then ends at its deadline (or the stream idle
  // timeout), still publishing nothing.
  const bool cancelled_before_its_header =
      other.error_code() == StatusCode::DEADLINE_EXCEEDED && nameless_cancels() > nameless_before;
  if (!cancelled_before_its_header) {
    EXPECT_TRUE(GrpcStatusIs(other, StatusCode::ABORTED, "cancelled")) << other.error_message();
  }
  ExpectNothingPublishedOrHeld(name, before);
}

TEST_P(PartedPutTest, PartsThatDoNotCoverTheTensorAreRefused) {
  const std::string name = TestTensorName("gap");
  const uint64_t before = HostBytesUsed();
  auto first = SendFirstPart(Part(name, 2, {0, 1 << 20}), before);
  grpc::Status last = RawPutPart(*stub_, Part(name, 2, {2 << 20, 1 << 20}));
  EXPECT_TRUE(
      GrpcStatusIs(last, StatusCode::INVALID_ARGUMENT, "cover 2097152 of its 3145728 bytes"))
      << last.error_message();
  EXPECT_EQ(first.get().first.error_code(), StatusCode::ABORTED);
  ExpectNothingPublishedOrHeld(name, before);
}

TEST_P(PartedPutTest, APartWithAnotherHeaderIsRefused) {
  const std::string name = TestTensorName("differs");
  const uint64_t before = HostBytesUsed();
  auto first = SendFirstPart(Part(name, 2, {0, 1 << 20}), before);
  std::vector<v1::PutRequest> other = Part(name, 2, {1 << 20, 2 << 20});
  other[0].mutable_header()->set_retention(v1::RETENTION_CACHE);
  grpc::Status refused = RawPutPart(*stub_, other);
  EXPECT_TRUE(GrpcStatusIs(refused, StatusCode::INVALID_ARGUMENT,
                           "differs from the put's first part in its retention"))
      << refused.error_message();
  EXPECT_EQ(first.get().first.error_code(), StatusCode::ABORTED);
  ExpectNothingPublishedOrHeld(name, before);
}

TEST_P(PartedPutTest, AWrongChecksumPublishesNothing) {
  const std::string name = TestTensorName("crc");
  const uint64_t before = HostBytesUsed();
  std::vector<std::future<std::pair<grpc::Status, v1::PutResponse>>> sent;
  for (PartSpec part : {PartSpec{0, 1 << 20}, PartSpec{1 << 20, 2 << 20}}) {
    std::vector<v1::PutRequest> messages = Part(name, 2, part);
    messages[0].mutable_header()->set_crc32c(Crc32c(bytes_.data(), bytes_.size()) ^ 1);
    sent.push_back(SendPart(std::move(messages)));
  }
  for (auto& part : sent) {
    grpc::Status status = part.get().first;
    EXPECT_TRUE(GrpcStatusIs(status, StatusCode::DATA_LOSS, "crc32c")) << status.error_message();
  }
  ExpectNothingPublishedOrHeld(name, before);
}

TEST_P(PartedPutTest, ChunksOutsideThePartAreRefused) {
  const std::string name = TestTensorName("outside");
  std::vector<v1::PutRequest> messages = {Part(name, 2, {1 << 20, 2 << 20})[0],
                                          ChunkMessage(0, "abcd")};
  grpc::Status refused = RawPutPart(*stub_, messages);
  EXPECT_TRUE(GrpcStatusIs(refused, StatusCode::INVALID_ARGUMENT, "sent a chunk at offset 0"))
      << refused.error_message();
  // A new upload id: the first ended, and its id answers with that ending.
  messages = {PartMessages(name, bytes_, NewUploadId(), 2, 0, 1 << 20)[0],
              ChunkMessage(0, std::string_view(bytes_).substr(0, (1 << 20) + 1))};
  refused = RawPutPart(*stub_, messages);
  EXPECT_TRUE(GrpcStatusIs(refused, StatusCode::INVALID_ARGUMENT, "beyond the part's end"))
      << refused.error_message();
  EXPECT_TRUE(GrpcStatusIs(RawStat(*stub_, name), StatusCode::NOT_FOUND, name));
}

TEST_P(PartedPutTest, PartsGoToPutPartAndWholePutsToPut) {
  const std::string name = TestTensorName("method");
  std::vector<v1::PutRequest> part = Part(name, 2, {0, 1 << 20});
  grpc::Status refused = RawPut(*stub_, part);
  EXPECT_TRUE(GrpcStatusIs(refused, StatusCode::INVALID_ARGUMENT, "parts go to PutPart"))
      << refused.error_message();
  part[0].mutable_header()->clear_part();
  refused = RawPutPart(*stub_, part);
  EXPECT_TRUE(GrpcStatusIs(refused, StatusCode::INVALID_ARGUMENT, "has no PutHeader.part"))
      << refused.error_message();
  EXPECT_TRUE(GrpcStatusIs(RawStat(*stub_, name), StatusCode::NOT_FOUND, name));
}

TEST_P(PartedPutTest, BadPartFieldsAreRefusedNamingTheValue) {
  const std::string name = TestTensorName("fields");
  struct Case {
    std::string upload_id;
    uint32_t parts;
    PartSpec part;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"0123456789ABCDEF0123456789ABCDEF", 2, {0, 1}, "is not 32 lowercase hex digits"},
      {"abc", 2, {0, 1}, "'abc' is not 32 lowercase hex digits"},
      {kUpload, 1, {0, 1}, "part.parts 1 streams; the limit is 2..16"},
      {kUpload, 17, {0, 1}, "part.parts 17 streams; the limit is 2..16"},
      {kUpload, 2, {0, 0}, "part [0, +0) is empty"},
      {kUpload, 2, {kTotal - 1, 2}, "reaches beyond total_bytes 3145728"},
  };
  for (const Case& bad : cases) {
    grpc::Status refused = RawPutPart(*stub_, {PartMessages(name, bytes_, bad.upload_id, bad.parts,
                                                            bad.part.offset, bad.part.length)[0]});
    EXPECT_TRUE(GrpcStatusIs(refused, StatusCode::INVALID_ARGUMENT, bad.message))
        << bad.message << ": " << refused.error_message();
  }
  EXPECT_TRUE(GrpcStatusIs(RawStat(*stub_, name), StatusCode::NOT_FOUND, name));
}

// The parts' logic is the same on every transport; TCP keeps the suite short.
INSTANTIATE_TEST_SUITE_P(Tcp, PartedPutTest, ::testing::Values(Transport::kTcp),
                         TransportParamName);

}  // namespace
}  // namespace tensord::testing
