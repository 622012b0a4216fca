// BatchFetch answers from the server's writer (BatchFetchItemsWire) read
// back by the client's decoder (BatchFetchItemsDecoder), cut into pieces
// at every place a slice boundary may fall.
#include "service/wire/batch_fetch_items.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/transport/batch_fetch_items_wire.h"
#include "tests/unit/grpc_buffer_bytes.h"

namespace tensord {
namespace {

struct Decoded {
  uint32_t index = 0;
  int32_t code = 0;
  std::string message;
  std::string name;
  uint64_t total_bytes = 0;
  bool has_inline_data = false;
  std::string inline_data;
};

absl::StatusOr<std::vector<Decoded>> DecodeAll(BatchFetchItemsDecoder& decoder,
                                               std::span<const std::span<const uint8_t>> pieces) {
  std::vector<Decoded> items;
  absl::Status status = decoder.Decode(pieces, [&](WireBatchFetchItem& item) {
    items.push_back({item.index, item.status_code, item.status_message, item.info.name,
                     item.info.total_bytes, item.has_inline_data,
                     std::string(item.inline_data.begin(), item.inline_data.end())});
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return items;
}

class BatchFetchItemsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      TensorVersion& version = versions_.emplace_back();
      version.name = "kv/" + std::to_string(i);
      version.version = 1 + i;
      version.layout.dtype = DLDataType{kDLUInt, 8, 1};
      version.total_bytes = 40 + i;
      version.layout.shape = {static_cast<int64_t>(version.total_bytes)};
      version.created = absl::FromUnixSeconds(1'700'000'000);
    }
    BatchFetchItemsWire wire(1 << 20);
    for (uint32_t i = 0; i < versions_.size(); ++i) {
      const TensorVersion& version = versions_[i];
      ASSERT_TRUE(*wire.AddVersion(i, version, /*with_bytes=*/i != 2, [&](uint8_t* out) {
        std::memset(out, 'a' + static_cast<int>(i), version.total_bytes);
        return absl::OkStatus();
      }));
    }
    ASSERT_TRUE(wire.AddFailure(3, absl::NotFoundError("tensor 'kv/3' not found")));
    bytes_ = BufferBytes(wire.Finish());
  }

  void ExpectTheItems(const std::vector<Decoded>& items) {
    ASSERT_EQ(items.size(), 4u);
    for (uint32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(items[i].index, i);
      EXPECT_EQ(items[i].code, 0);
      EXPECT_EQ(items[i].name, versions_[i].name);
      EXPECT_EQ(items[i].total_bytes, versions_[i].total_bytes);
    }
    EXPECT_EQ(items[0].inline_data, std::string(40, 'a'));
    EXPECT_EQ(items[1].inline_data, std::string(41, 'b'));
    EXPECT_FALSE(items[2].has_inline_data) << "a large item's chunks follow";
    EXPECT_EQ(items[3].index, 3u);
    EXPECT_EQ(items[3].code, static_cast<int32_t>(absl::StatusCode::kNotFound));
    EXPECT_EQ(items[3].message, "tensor 'kv/3' not found");
  }

  std::deque<TensorVersion> versions_;  // TensorVersion does not move
  std::string bytes_;
};

TEST_F(BatchFetchItemsTest, ReadsTheServersItemsCutAnywhere) {
  BatchFetchItemsDecoder decoder;  // reused: nothing of one message leaks into the next
  const auto* data = reinterpret_cast<const uint8_t*>(bytes_.data());
  for (size_t cut = 0; cut <= bytes_.size(); ++cut) {
    const std::span<const uint8_t> pieces[] = {{data, cut}, {data + cut, bytes_.size() - cut}};
    absl::StatusOr<std::vector<Decoded>> items = DecodeAll(decoder, pieces);
    ASSERT_TRUE(items.ok()) << "cut at " << cut << ": " << items.status();
    ExpectTheItems(*items);
  }
}

TEST_F(BatchFetchItemsTest, RefusesTruncatedItemsAndAChunkBesideThem) {
  BatchFetchItemsDecoder decoder;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes_.data());
  for (size_t size = 1; size < bytes_.size(); ++size) {
    const std::span<const uint8_t> piece[] = {{data, size}};
    EXPECT_EQ(DecodeAll(decoder, piece).status().code(), absl::StatusCode::kInvalidArgument)
        << "truncated to " << size;
  }
  // A chunk (field 2: offset 0, no data) after the items.
  const std::string with_chunk = bytes_ + std::string("\x12\x02\x08\x00", 4);
  const std::span<const uint8_t> piece[] = {
      {reinterpret_cast<const uint8_t*>(with_chunk.data()), with_chunk.size()}};
  absl::StatusOr<std::vector<Decoded>> items = DecodeAll(decoder, piece);
  EXPECT_EQ(items.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(items.status().message().find("a chunk and items"), std::string::npos)
      << items.status();
}

TEST_F(BatchFetchItemsTest, StopsAtTheFirstItemItsCallerRefuses) {
  BatchFetchItemsDecoder decoder;
  const std::span<const uint8_t> piece[] = {
      {reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()}};
  int calls = 0;
  const absl::Status status = decoder.Decode(piece, [&](WireBatchFetchItem&) {
    ++calls;
    return absl::InternalError("no room");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tensord
