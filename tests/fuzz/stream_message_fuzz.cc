// libFuzzer target: DecodeStreamMessage, which parses gRPC stream messages
// (PutRequest / FetchResponse) straight from the received slices. The first
// bytes of the input choose where the message is cut into pieces, so piece
// boundaries are fuzzed as well as the wire bytes; each piece lives in its own
// heap block so that ASan sees a read that runs past a piece.
//
// Input: [n = byte % 9] [n piece lengths, one byte each] [message bytes...]
// The last piece takes whatever the lengths leave over.
//
// Beyond "no crash", an accepted message must be self-consistent, its chunk
// pieces must lie inside the input pieces, protobuf must read the same chunk
// from the same bytes, and a chunk must survive EncodeChunkPrefix. Decoded
// with the fetch header's inline data lifted out, a header must be the same
// FetchHeader as the one decoded whole, and the lifted pieces must lie
// inside the input.
//
// The same pieces go through BatchFetchItemsDecoder (the client's reader of
// BatchFetch answers) and BatchPutItemsDecoder (the server's reader of
// BatchPut options and items): every message they accept, protobuf reads
// as the same options and items.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/src/info_conversion.h"
#include "google/protobuf/stubs/logging.h"
#include "service/wire/batch_fetch_items.h"
#include "service/wire/batch_put_items.h"
#include "service/wire/stream_message.h"
#include "tensord/v1/tensor_service.pb.h"
#include "tests/fuzz/same_put_header.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

std::string Join(std::span<const std::span<const uint8_t>> pieces) {
  std::string out;
  for (std::span<const uint8_t> piece : pieces) {
    out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  }
  return out;
}

bool Inside(std::span<const uint8_t> inner, std::span<const uint8_t> outer) {
  auto begin = reinterpret_cast<uintptr_t>(inner.data());
  auto outer_begin = reinterpret_cast<uintptr_t>(outer.data());
  return begin >= outer_begin && inner.size() <= outer.size() &&
         begin - outer_begin <= outer.size() - inner.size();
}

bool InsideAny(std::span<const uint8_t> inner,
               const std::vector<std::span<const uint8_t>>& pieces) {
  for (std::span<const uint8_t> piece : pieces) {
    if (Inside(inner, piece)) return true;
  }
  return false;
}

// The same pieces decoded with HeaderInlineData::kLift against `kept`, the
// message decoded without.
void CheckLifted(const std::vector<std::span<const uint8_t>>& pieces,
                 const tensord::StreamMessage& kept) {
  using namespace tensord;
  StreamMessage lifted;
  lifted.has_inline_data = true;  // stale state must not survive
  lifted.inline_data.emplace_back(pieces.front().data(), 0);
  if (!DecodeStreamMessage(pieces, lifted, HeaderInlineData::kLift).ok()) {
    // Lifting refuses only what the plain decoder also refuses, or a header
    // field of a group wire type (which protobuf alone would skip).
    return;
  }
  Check(lifted.kind == kept.kind);
  if (lifted.kind != StreamMessage::Kind::kHeader) {
    Check(!lifted.has_inline_data && lifted.inline_data.empty());
    return;
  }
  uint64_t total = 0;
  for (std::span<const uint8_t> piece : lifted.inline_data) {
    Check(InsideAny(piece, pieces));
    total += piece.size();
  }
  Check(lifted.has_inline_data || lifted.inline_data.empty());
  Check(lifted.header.size() + total <= kept.header.size());
  v1::FetchHeader whole;
  v1::FetchHeader rebuilt;
  const bool whole_ok = whole.ParseFromString(kept.header);
  const bool rebuilt_ok = rebuilt.ParseFromString(lifted.header);
  Check(whole_ok == rebuilt_ok);  // the other fields are the same bytes
  if (!whole_ok) return;
  Check(!rebuilt.has_inline_data());
  Check(whole.has_inline_data() == lifted.has_inline_data);
  if (lifted.has_inline_data) rebuilt.set_inline_data(Join(lifted.inline_data));
  Check(rebuilt.SerializeAsString() == whole.SerializeAsString());
}

// What BatchFetchItemsDecoder hands out for one item, kept past its call.
struct DecodedItem {
  tensord::WireBatchFetchItem item;
  std::string inline_data;
};

void CheckBatchFetchItems(const std::vector<std::span<const uint8_t>>& pieces,
                          const std::string& whole) {
  using namespace tensord;
  BatchFetchItemsDecoder decoder;
  std::vector<DecodedItem> decoded;
  const absl::Status status = decoder.Decode(pieces, [&](WireBatchFetchItem& item) {
    decoded.push_back({item, std::string(item.inline_data.begin(), item.inline_data.end())});
    return absl::OkStatus();
  });
  if (!status.ok()) {
    Check(status.code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  v1::BatchFetchResponse proto;
  Check(proto.ParseFromString(whole));
  Check(proto.kind_case() != v1::BatchFetchResponse::kChunk);
  Check(static_cast<int>(decoded.size()) == proto.items().items_size());
  for (size_t i = 0; i < decoded.size(); ++i) {
    const WireBatchFetchItem& got = decoded[i].item;
    const v1::BatchFetchItem& want = proto.items().items(static_cast<int>(i));
    Check(got.index == want.index() && got.has_status == want.has_status() &&
          got.status_code == want.status().code() &&
          got.status_message == want.status().message() && got.has_info == want.has_info() &&
          got.info == WireInfoOf(want.info()) && got.has_inline_data == want.has_inline_data() &&
          decoded[i].inline_data == want.inline_data());
  }
}

void CheckBatchPutItems(const std::vector<std::span<const uint8_t>>& pieces,
                        const std::string& whole) {
  using namespace tensord;
  BatchPutItemsDecoder decoder;
  // Each item's header and data, kept past its call (the header's strings
  // copied and viewed again where they are kept).
  struct KeptItem {
    std::string name;
    std::string upload_id;
    WirePutHeader header;
    std::string data;
  };
  std::deque<KeptItem> items;
  const absl::StatusOr<BatchPutItemsDecoder::Message> message =
      decoder.Decode(pieces, [&](const WireBatchPutItem& item) {
        WirePutHeader header;
        if (!ParseBatchPutHeader(item, BatchPutItemsDecoder::kItemNesting, header)) {
          return absl::InvalidArgumentError("header");
        }
        KeptItem& kept = items.emplace_back();
        kept.name = std::string(header.name);
        if (header.part.has_value()) kept.upload_id = std::string(header.part->upload_id);
        kept.header = std::move(header);
        kept.header.name = kept.name;
        if (kept.header.part.has_value()) kept.header.part->upload_id = kept.upload_id;
        kept.data = std::string(item.data.begin(), item.data.end());
        return absl::OkStatus();
      });
  if (!message.ok()) {
    Check(message.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  v1::BatchPutRequest proto;
  Check(proto.ParseFromString(whole));
  Check(!(message->has_options && message->has_items));
  Check(message->has_options == proto.has_options());
  Check(message->has_items == proto.has_items());
  if (message->has_options) Check(message->atomic == proto.options().atomic());
  Check(static_cast<int>(items.size()) == proto.items().items_size());
  for (size_t i = 0; i < items.size(); ++i) {
    const v1::BatchPutItem& want = proto.items().items(static_cast<int>(i));
    Check(SamePutHeader(items[i].header, want.header()));
    Check(items[i].data == want.data());
  }
}

}  // namespace

// Protobuf logs every string field with invalid UTF-8 it rejects; at
// thousands of inputs a second that is only noise.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  if (size == 0) return 0;
  const size_t cuts = std::min<size_t>(data[0] % 9, size - 1);
  const uint8_t* lengths = data + 1;
  const uint8_t* wire = data + 1 + cuts;
  const size_t wire_size = size - 1 - cuts;

  // One heap block per piece, exactly as long as the piece (empty pieces too).
  std::vector<std::unique_ptr<uint8_t[]>> blocks;
  std::vector<std::span<const uint8_t>> pieces;
  size_t at = 0;
  for (size_t i = 0; i <= cuts; ++i) {
    size_t n = i < cuts ? std::min<size_t>(lengths[i], wire_size - at) : wire_size - at;
    blocks.push_back(std::make_unique<uint8_t[]>(n));
    if (n > 0) std::memcpy(blocks.back().get(), wire + at, n);
    pieces.emplace_back(blocks.back().get(), n);
    at += n;
  }
  Check(at == wire_size);
  const std::string whole(reinterpret_cast<const char*>(wire), wire_size);
  CheckBatchFetchItems(pieces, whole);
  CheckBatchPutItems(pieces, whole);

  StreamMessage message;
  // A stale message must not leak into the next decode.
  message.kind = StreamMessage::Kind::kChunk;
  message.header = "stale";
  message.chunk_offset = 7;
  message.chunk_size = 7;
  message.chunk_pieces.emplace_back(wire, 0);
  if (!DecodeStreamMessage(pieces, message).ok()) return 0;

  CheckLifted(pieces, message);
  switch (message.kind) {
    case StreamMessage::Kind::kEmpty:
      Check(message.header.empty() && message.chunk_offset == 0 && message.chunk_size == 0 &&
            message.chunk_pieces.empty());
      break;
    case StreamMessage::Kind::kHeader: {
      Check(message.header.size() <= kMaxStreamHeaderBytes);
      Check(message.chunk_offset == 0 && message.chunk_size == 0 && message.chunk_pieces.empty());
      // Where protobuf reads a header from the same bytes, it is the same one.
      v1::PutRequest request;
      if (request.ParseFromString(whole)) {
        Check(request.has_header());
        v1::PutHeader header;
        Check(header.ParseFromString(message.header));
        Check(header.SerializeAsString() == request.header().SerializeAsString());
      }
      break;
    }
    case StreamMessage::Kind::kChunk: {
      Check(message.header.empty());
      uint64_t total = 0;
      for (std::span<const uint8_t> piece : message.chunk_pieces) {
        bool inside = false;
        for (std::span<const uint8_t> input : pieces) inside = inside || Inside(piece, input);
        Check(inside);
        total += piece.size();
      }
      Check(total == message.chunk_size);
      Check(total <= wire_size);
      const std::string chunk = Join(message.chunk_pieces);

      // Protobuf reads the same chunk from the same bytes.
      v1::PutRequest request;
      Check(request.ParseFromString(whole));
      Check(request.has_chunk());
      Check(request.chunk().offset() == message.chunk_offset);
      Check(request.chunk().data() == chunk);

      // What we decode, we can frame again and decode to the same chunk.
      uint8_t prefix[kMaxChunkPrefixBytes];
      const size_t n = EncodeChunkPrefix(message.chunk_offset, message.chunk_size, prefix);
      Check(n <= kMaxChunkPrefixBytes);
      const std::span<const uint8_t> again[] = {
          {prefix, n}, {reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size()}};
      StreamMessage reencoded;
      Check(DecodeStreamMessage(again, reencoded).ok());
      Check(reencoded.kind == StreamMessage::Kind::kChunk);
      Check(reencoded.chunk_offset == message.chunk_offset);
      Check(reencoded.chunk_size == message.chunk_size);
      Check(Join(reencoded.chunk_pieces) == chunk);
      break;
    }
  }
  return 0;
}
