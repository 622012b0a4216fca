// The Fetch answer receiver (service/wire/fetch_receiver.h) against a
// sender that misbehaves, as the client uses it (FetchStreamReceiver) and
// as a cluster pull does (its own sink, DATA_LOSS for a violation): every
// range, offset and size is checked before a byte is written.
#include "client/src/fetch_stream_receiver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "service/common/crc32c.h"
#include "service/wire/fetch_receiver.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {
namespace {

constexpr uint64_t kTensorBytes = 16;  // float32[4]

v1::FetchHeader HeaderFor(uint64_t offset, uint64_t length, uint32_t crc32c) {
  v1::FetchHeader header;
  v1::TensorInfo* info = header.mutable_info();
  info->set_name("w");
  info->set_version(7);
  info->mutable_layout()->mutable_dtype()->set_code(2);  // float
  info->mutable_layout()->mutable_dtype()->set_bits(32);
  info->mutable_layout()->mutable_dtype()->set_lanes(1);
  info->mutable_layout()->add_shape(4);
  info->set_total_bytes(kTensorBytes);
  info->set_crc32c(crc32c);
  header.mutable_range()->set_offset(offset);
  header.mutable_range()->set_length(length);
  return header;
}

StreamMessage ChunkMessage(uint64_t offset, const std::vector<uint8_t>& bytes) {
  StreamMessage message;
  message.kind = StreamMessage::Kind::kChunk;
  message.chunk_offset = offset;
  message.chunk_size = bytes.size();
  message.chunk_pieces.emplace_back(bytes.data(), bytes.size());
  return message;
}

class FetchStreamReceiverTest : public ::testing::Test {
 protected:
  FetchStreamReceiverTest() : stored_(kTensorBytes) {
    for (size_t i = 0; i < stored_.size(); ++i) stored_[i] = static_cast<uint8_t>(i + 1);
    crc_ = Crc32c(stored_.data(), stored_.size());
    options_.verify_crc32c = true;
    options_.progress = [this](uint64_t done, uint64_t total) {
      progress_.emplace_back(done, total);
    };
  }

  // A callable for FetchStreamReceiver::DestinationFor (a FunctionRef, so
  // the callable must live in the test body).
  auto Destination() {
    return [this](const TensorInfo& info, uint64_t length) -> absl::StatusOr<uint8_t*> {
      ++destinations_asked_;
      EXPECT_EQ(info.name, "w");
      buffer_.assign(length, 0);
      return buffer_.data();
    };
  }

  // `header` as the client's decoder hands it over: inline data lifted out
  // in place, pointing into a wire copy the fixture keeps.
  StreamMessage HeaderMessage(const v1::FetchHeader& header) {
    v1::FetchResponse response;
    *response.mutable_header() = header;
    const std::string& wire = wires_.emplace_back(response.SerializeAsString());
    const std::span<const uint8_t> pieces[] = {
        {reinterpret_cast<const uint8_t*>(wire.data()), wire.size()}};
    StreamMessage message;
    EXPECT_TRUE(DecodeStreamMessage(pieces, message, HeaderInlineData::kLift).ok());
    return message;
  }

  std::vector<uint8_t> Bytes(size_t begin, size_t end) const {
    return std::vector<uint8_t>(stored_.begin() + begin, stored_.begin() + end);
  }

  std::vector<uint8_t> stored_;
  uint32_t crc_ = 0;
  FetchOptions options_;
  std::vector<std::pair<uint64_t, uint64_t>> progress_;
  std::vector<uint8_t> buffer_;
  int destinations_asked_ = 0;
  std::deque<std::string> wires_;
};

TEST_F(FetchStreamReceiverTest, ChunksInOrderFillTheDestinationAndReportProgress) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
  EXPECT_FALSE(receiver.complete());
  std::vector<uint8_t> first = Bytes(0, 10), second = Bytes(10, 16);
  ASSERT_TRUE(receiver.Receive(ChunkMessage(0, first)).ok());
  EXPECT_FALSE(receiver.complete());
  ASSERT_TRUE(receiver.Receive(ChunkMessage(10, second)).ok());
  EXPECT_TRUE(receiver.complete());
  const absl::Status finished = receiver.Finish();
  ASSERT_TRUE(finished.ok()) << finished;
  EXPECT_EQ(receiver.TakeInfo().version, 7u);
  EXPECT_EQ(buffer_, stored_);
  EXPECT_EQ(destinations_asked_, 1);
  EXPECT_EQ(progress_, (std::vector<std::pair<uint64_t, uint64_t>>{{10, 16}, {16, 16}}));
}

TEST_F(FetchStreamReceiverTest, ChunkSplitIntoPiecesIsCopiedInOrder) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
  StreamMessage chunk;
  chunk.kind = StreamMessage::Kind::kChunk;
  chunk.chunk_offset = 0;
  chunk.chunk_size = kTensorBytes;
  chunk.chunk_pieces = {{stored_.data(), 3}, {stored_.data() + 3, 13}};
  ASSERT_TRUE(receiver.Receive(chunk).ok());
  ASSERT_TRUE(receiver.Finish().ok());
  EXPECT_EQ(buffer_, stored_);
}

TEST_F(FetchStreamReceiverTest, InlineHeaderCompletesTheStream) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  v1::FetchHeader header = HeaderFor(0, kTensorBytes, crc_);
  header.set_inline_data(std::string(stored_.begin(), stored_.end()));
  ASSERT_TRUE(receiver.Receive(HeaderMessage(header)).ok());
  EXPECT_TRUE(receiver.complete());
  ASSERT_TRUE(receiver.Finish().ok());
  EXPECT_EQ(buffer_, stored_);
  EXPECT_EQ(progress_.size(), 1u);
}

TEST_F(FetchStreamReceiverTest, PartialRangeSkipsTheWholeTensorChecksum) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(4, 8, crc_))).ok());
  std::vector<uint8_t> middle = Bytes(4, 12);
  ASSERT_TRUE(receiver.Receive(ChunkMessage(4, middle)).ok());
  ASSERT_TRUE(receiver.Finish().ok());
  EXPECT_EQ(buffer_, middle);
}

TEST_F(FetchStreamReceiverTest, FirstMessageMustBeAHeader) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  std::vector<uint8_t> bytes = Bytes(0, 4);
  absl::Status status = receiver.Receive(ChunkMessage(0, bytes));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(destinations_asked_, 0);

  StreamMessage garbage;
  garbage.kind = StreamMessage::Kind::kHeader;
  garbage.header = "\xff\xff\xff";
  FetchStreamReceiver second(options_, destination, "w");
  EXPECT_EQ(second.Receive(garbage).code(), absl::StatusCode::kInternal);
}

TEST_F(FetchStreamReceiverTest, RangeBeyondTheTensorIsRefusedBeforeAskingForMemory) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  absl::Status status = receiver.Receive(HeaderMessage(HeaderFor(8, 9, crc_)));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("range [8, +9) of a 16-byte tensor"), std::string::npos)
      << status;
  EXPECT_EQ(destinations_asked_, 0);
}

TEST_F(FetchStreamReceiverTest, LayoutThatDoesNotFitTotalBytesIsRefused) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  v1::FetchHeader header = HeaderFor(0, 8, crc_);
  header.mutable_info()->set_total_bytes(8);  // float32[4] needs 16
  EXPECT_EQ(receiver.Receive(HeaderMessage(header)).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(destinations_asked_, 0);
}

TEST_F(FetchStreamReceiverTest, InlineDataOfTheWrongSizeIsRefused) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  v1::FetchHeader header = HeaderFor(0, kTensorBytes, crc_);
  header.set_inline_data(std::string(15, 'x'));
  absl::Status status = receiver.Receive(HeaderMessage(header));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("15 inline bytes of a 16-byte range"), std::string::npos)
      << status;
  EXPECT_EQ(buffer_, std::vector<uint8_t>(kTensorBytes, 0));  // nothing copied
}

TEST_F(FetchStreamReceiverTest, OutOfOrderOverlongOrExtraChunksAreRefused) {
  auto destination = Destination();
  std::vector<uint8_t> first = Bytes(0, 8), rest = Bytes(8, 16), all = Bytes(0, 16);
  std::vector<uint8_t> overlong(17, 0);
  {
    FetchStreamReceiver receiver(options_, destination, "w");
    ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
    EXPECT_EQ(receiver.Receive(ChunkMessage(8, rest)).code(), absl::StatusCode::kInternal);
  }
  {
    FetchStreamReceiver receiver(options_, destination, "w");
    ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
    EXPECT_EQ(receiver.Receive(ChunkMessage(0, overlong)).code(), absl::StatusCode::kInternal);
  }
  {
    FetchStreamReceiver receiver(options_, destination, "w");
    ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
    ASSERT_TRUE(receiver.Receive(ChunkMessage(0, all)).ok());
    EXPECT_EQ(receiver.Receive(ChunkMessage(16, first)).code(), absl::StatusCode::kInternal);
    EXPECT_EQ(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).code(),
              absl::StatusCode::kInternal);
  }
  EXPECT_EQ(buffer_, stored_);  // the refused chunks wrote nothing
}

TEST_F(FetchStreamReceiverTest, ShortStreamIsDataLoss) {
  auto destination = Destination();
  FetchStreamReceiver receiver(options_, destination, "w");
  EXPECT_EQ(receiver.Finish().code(), absl::StatusCode::kInternal);  // no header
  ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
  std::vector<uint8_t> first = Bytes(0, 8);
  ASSERT_TRUE(receiver.Receive(ChunkMessage(0, first)).ok());
  absl::Status status = receiver.Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("ended after 8 of 16 bytes"), std::string::npos) << status;
}

TEST_F(FetchStreamReceiverTest, ChecksumMismatchIsDataLossOnlyWhenVerifying) {
  auto destination = Destination();
  std::vector<uint8_t> corrupted = stored_;
  corrupted[5] ^= 0x40;
  {
    FetchStreamReceiver receiver(options_, destination, "w");
    ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
    ASSERT_TRUE(receiver.Receive(ChunkMessage(0, corrupted)).ok());
    EXPECT_EQ(receiver.Finish().code(), absl::StatusCode::kDataLoss);
  }
  options_.verify_crc32c = false;
  {
    FetchStreamReceiver receiver(options_, destination, "w");
    ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
    ASSERT_TRUE(receiver.Receive(ChunkMessage(0, corrupted)).ok());
    EXPECT_TRUE(receiver.Finish().ok());
  }
}

TEST_F(FetchStreamReceiverTest, DestinationErrorIsReturnedAsIs) {
  auto refuse = [](const TensorInfo&, uint64_t) -> absl::StatusOr<uint8_t*> {
    return absl::InvalidArgumentError("destination float32[3] does not match");
  };
  FetchStreamReceiver receiver(options_, refuse, "w");
  absl::Status status = receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_)));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  // The refused header does not count as received, though its info was
  // read in place.
  EXPECT_FALSE(receiver.complete());
  EXPECT_EQ(receiver.Finish().code(), absl::StatusCode::kInternal);
}

// A sink as a pull's: it records what it was given, and may refuse the
// header (the pull refuses what the cluster did not record).
class RecordingSink final : public FetchReceiver::Sink {
 public:
  absl::Status Open(WireFetchHeader& header) override {
    ++opened;
    split = header.split;
    name = header.info.name;
    if (!refusal.ok()) return refusal;
    bytes.assign(header.range_length, 0);
    return absl::OkStatus();
  }
  absl::Status Write(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                     uint64_t size) override {
    writes.emplace_back(offset, size);
    for (std::span<const uint8_t> piece : pieces) {
      std::copy(piece.begin(), piece.end(), bytes.begin() + offset);
      offset += piece.size();
    }
    return absl::OkStatus();
  }
  absl::Status refusal;
  int opened = 0;
  bool split = false;
  std::string name;
  std::vector<uint8_t> bytes;
  std::vector<std::pair<uint64_t, uint64_t>> writes;
};

TEST_F(FetchStreamReceiverTest,
       APullsReceiverWritesRangeRelativeAndRefusesWithDataLossNamingTheNode) {
  const FetchReceiver::Options pull{.verify_crc32c = true,
                                    .violation = absl::StatusCode::kDataLoss};
  {
    RecordingSink sink;
    FetchReceiver receiver(pull, sink, "node b's copy of", "w");
    ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(4, 12, crc_))).ok());
    const std::vector<uint8_t> rest = Bytes(4, 16);
    ASSERT_TRUE(receiver.Receive(ChunkMessage(4, rest)).ok());
    EXPECT_TRUE(receiver.complete());
    EXPECT_TRUE(receiver.Finish().ok()) << "a range is not summed against the whole tensor";
    EXPECT_EQ(sink.opened, 1);
    EXPECT_EQ(sink.name, "w");
    EXPECT_EQ(sink.writes, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 12}}));
    EXPECT_EQ(sink.bytes, rest);
  }
  {
    RecordingSink sink;
    FetchReceiver receiver(pull, sink, "node b's copy of", "w");
    ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_))).ok());
    const std::vector<uint8_t> late = Bytes(8, 16);
    const absl::Status skipped = receiver.Receive(ChunkMessage(8, late));
    EXPECT_EQ(skipped.code(), absl::StatusCode::kDataLoss) << skipped;
    EXPECT_NE(skipped.message().find("node b's copy of 'w': an unexpected message at byte 0"),
              std::string::npos)
        << skipped;
    EXPECT_TRUE(sink.writes.empty());
  }
  {
    // Bytes other than the stated CRC-32C says: DATA_LOSS at Finish.
    RecordingSink sink;
    FetchReceiver receiver(pull, sink, "node b's copy of", "w");
    ASSERT_TRUE(receiver.Receive(HeaderMessage(HeaderFor(0, kTensorBytes, crc_ ^ 1))).ok());
    const std::vector<uint8_t> all = Bytes(0, 16);
    ASSERT_TRUE(receiver.Receive(ChunkMessage(0, all)).ok());
    const absl::Status finished = receiver.Finish();
    EXPECT_EQ(finished.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(finished.message().find("node b's copy of 'w': the bytes have CRC-32C"),
              std::string::npos)
        << finished;
  }
  {
    // The sink's refusal is the answer, as it is, before any byte.
    RecordingSink sink;
    sink.refusal = absl::ResourceExhaustedError("registry full");
    FetchReceiver receiver(pull, sink, "node b's copy of", "w");
    v1::FetchHeader header = HeaderFor(0, kTensorBytes, crc_);
    header.set_inline_data(std::string(stored_.begin(), stored_.end()));
    EXPECT_EQ(receiver.Receive(HeaderMessage(header)).code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(sink.writes.empty());
  }
  {
    // A split header opens the sink (the client converts its info) and
    // completes with no bytes.
    RecordingSink sink;
    FetchReceiver receiver(pull, sink, "node b's copy of", "w");
    v1::FetchHeader header = HeaderFor(0, kTensorBytes, crc_);
    header.set_split(true);
    ASSERT_TRUE(receiver.Receive(HeaderMessage(header)).ok());
    EXPECT_TRUE(sink.split);
    EXPECT_TRUE(receiver.complete());
    EXPECT_TRUE(receiver.split());
    EXPECT_TRUE(receiver.Finish().ok());
  }
}

}  // namespace
}  // namespace tensord
