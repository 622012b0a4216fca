// How a large transfer is split into streams and byte ranges.
#include "client/src/transfer_streams.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tensord {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

void ExpectContiguous(const std::vector<TransferPart>& parts, uint64_t offset, uint64_t length) {
  uint64_t at = offset;
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].offset, at) << "part " << i;
    if (i + 1 < parts.size()) EXPECT_EQ(parts[i].length % kMiB, 0u) << "part " << i;
    at += parts[i].length;
  }
  EXPECT_EQ(at, offset + length);
}

TEST(TransferStreamsTest, PartsCoverTheRangeExactlyOnMiBBoundaries) {
  for (uint64_t length : {256 * kMiB, 256 * kMiB + 12345, 17 * kMiB, kMiB / 2}) {
    for (uint32_t parts : {1u, 2u, 3u, 4u, 8u}) {
      std::vector<TransferPart> split = SplitIntoParts(4096, length, parts);
      ExpectContiguous(split, 4096, length);
      EXPECT_LE(split.size(), parts);
    }
  }
  EXPECT_EQ(SplitIntoParts(0, 256 * kMiB, 4).size(), 4u);
  EXPECT_EQ(SplitIntoParts(0, 256 * kMiB, 4)[3].length, 64 * kMiB);
}

TEST(TransferStreamsTest, AutomaticFetchStreamsFollowTheSizeAndHalfTheCores) {
  constexpr TransferDirection kFetch = TransferDirection::kFetch;
  EXPECT_EQ(SplitAboveBytes(kFetch, 0, 2), 0u) << "never split on 2 cores";
  EXPECT_EQ(TransferStreamsFor(kFetch, 1024 * kMiB, 0, 2), 1u);
  EXPECT_EQ(SplitAboveBytes(kFetch, 0, 16), kAutoBytesPerStream);
  EXPECT_EQ(TransferStreamsFor(kFetch, 100 * kMiB, 0, 16), 2u);
  EXPECT_EQ(TransferStreamsFor(kFetch, 1024 * kMiB, 0, 16), kMaxAutoTransferStreams);
  EXPECT_EQ(TransferStreamsFor(kFetch, 1024 * kMiB, 0, 6), 3u);
}

TEST(TransferStreamsTest, AutomaticPutStreamsFollowTheSize) {
  constexpr TransferDirection kPut = TransferDirection::kPut;
  EXPECT_EQ(SplitAboveBytes(kPut, 0, 1), 0u) << "never split on 1 core";
  EXPECT_EQ(SplitAboveBytes(kPut, 0, 2), kAutoBytesPerStream);
  EXPECT_EQ(TransferStreamsFor(kPut, 100 * kMiB, 0, 2), 2u) << "one per 64 MiB";
  EXPECT_EQ(TransferStreamsFor(kPut, 1024 * kMiB, 0, 2), kMaxAutoTransferStreams)
      << "more parts than cores: they also wait on new pages";
  EXPECT_EQ(TransferStreamsFor(kPut, 1024 * kMiB, 0, 16), kMaxAutoTransferStreams);
  EXPECT_EQ(TransferStreamsFor(kPut, 1024 * kMiB, 0, 1), 1u);
}

TEST(TransferStreamsTest, ARequestedCountIsKeptAboveTheSmallestPart) {
  for (TransferDirection direction : {TransferDirection::kFetch, TransferDirection::kPut}) {
    EXPECT_EQ(SplitAboveBytes(direction, 1, 64), 0u) << "one stream is never split";
    EXPECT_EQ(SplitAboveBytes(direction, 4, 2), kMinStreamPartBytes);
    EXPECT_EQ(TransferStreamsFor(direction, 256 * kMiB, 4, 2), 4u);
    EXPECT_EQ(TransferStreamsFor(direction, 40 * kMiB, 8, 2), 2u) << "parts of at least 16 MiB";
    EXPECT_EQ(TransferStreamsFor(direction, kMiB, 8, 2), 1u);
  }
}

TEST(TransferStreamsTest, MoreThanTheMostStreamsIsNamed) {
  EXPECT_TRUE(ValidateTransferStreams(kMaxTransferStreams).ok());
  absl::Status refused = ValidateTransferStreams(kMaxTransferStreams + 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("streams 9 is more than 8"), std::string::npos) << refused;
}

TEST(TransferStreamsTest, TheCauseOfFailedPartsIsNotAnEcho) {
  // As a put sees them: our cancellation, and the server's ABORTED.
  auto cause = [](std::vector<absl::Status> outcomes, bool deadline_passed) {
    return CauseOfFailedParts(outcomes, {absl::StatusCode::kCancelled, absl::StatusCode::kAborted},
                              deadline_passed, "the put of 'x'");
  };
  EXPECT_TRUE(cause({absl::OkStatus(), absl::OkStatus()}, true).ok());
  // The part that failed for itself names the cause, wherever it is.
  absl::Status found = cause({absl::CancelledError("ours"), absl::AbortedError("echo"),
                              absl::DeadlineExceededError("late"), absl::DataLossError("crc")},
                             false);
  EXPECT_EQ(found.code(), absl::StatusCode::kDeadlineExceeded) << found;
  // Only echoes: the first of them, unless the deadline passed, which then
  // started them (the server saw it first and ended the other parts).
  found =
      cause({absl::OkStatus(), absl::CancelledError("ours"), absl::AbortedError("echo")}, false);
  EXPECT_EQ(found.code(), absl::StatusCode::kCancelled) << found;
  found = cause({absl::AbortedError("echo"), absl::CancelledError("ours")}, true);
  EXPECT_EQ(found.code(), absl::StatusCode::kDeadlineExceeded) << found;
  EXPECT_TRUE(absl::StrContains(found.message(), "the put of 'x'")) << found;
  EXPECT_TRUE(absl::StrContains(found.message(), "echo")) << found;
  // What is an echo depends on the transfer: a fetch part's ABORTED is its own.
  const std::vector<absl::Status> fetch_parts = {absl::CancelledError("ours"),
                                                 absl::AbortedError("own")};
  found = CauseOfFailedParts(fetch_parts, {absl::StatusCode::kCancelled}, true, "the fetch of 'x'");
  EXPECT_EQ(found.code(), absl::StatusCode::kAborted) << found;
}

}  // namespace
}  // namespace tensord
