#include "service/wire/stream_message.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/common/status_macros.h"
#include "service/wire/piece_reader.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

constexpr uint32_t kHeaderField = 1;
constexpr uint32_t kChunkField = 2;
constexpr uint32_t kChunkOffsetField = 1;
constexpr uint32_t kChunkDataField = 2;
constexpr uint32_t kInlineDataField = 3;  // FetchHeader.inline_data

absl::Status DecodeChunk(PieceReader& reader, uint64_t size, StreamMessage& message) {
  const uint64_t end_remaining = reader.remaining() - size;
  bool saw_data = false;
  while (reader.remaining() > end_remaining) {
    uint32_t field = 0, wire_type = 0;
    TENSORD_RETURN_IF_ERROR(ReadTag(reader, field, wire_type));
    if (field == kChunkOffsetField && wire_type == kWireVarint) {
      TENSORD_RETURN_IF_ERROR(reader.ReadVarint(message.chunk_offset));
    } else if (field == kChunkDataField && wire_type == kWireLengthDelimited) {
      if (saw_data) return Malformed("chunk data field repeated", reader.position());
      saw_data = true;
      uint64_t data_size = 0;
      TENSORD_RETURN_IF_ERROR(reader.ReadLength(data_size));
      if (data_size > reader.remaining() - end_remaining) {
        return Malformed("chunk data beyond the chunk end", reader.position());
      }
      TENSORD_RETURN_IF_ERROR(reader.TakeSpans(data_size, message.chunk_pieces));
      message.chunk_size = data_size;
    } else {
      TENSORD_RETURN_IF_ERROR(SkipField(reader, wire_type));
    }
    if (reader.remaining() < end_remaining) {
      return Malformed("chunk field beyond the chunk end", reader.position());
    }
  }
  return absl::OkStatus();
}

// The header's `size` bytes at the reader into message.header, all but its
// inline-data field, whose data is handed out in place. Other fields are
// copied byte for byte, so protobuf reads them exactly as it would have.
absl::Status LiftInlineData(PieceReader& reader, uint64_t size, StreamMessage& message) {
  const uint64_t end_remaining = reader.remaining() - size;
  message.header.reserve(std::min<uint64_t>(size, 256));
  while (reader.remaining() > end_remaining) {
    const PieceReader field_start = reader;
    uint32_t field = 0, wire_type = 0;
    TENSORD_RETURN_IF_ERROR(ReadTag(reader, field, wire_type));
    if (field == kInlineDataField && wire_type == kWireLengthDelimited) {
      uint64_t data_size = 0;
      TENSORD_RETURN_IF_ERROR(reader.ReadLength(data_size));
      if (data_size > reader.remaining() || reader.remaining() - data_size < end_remaining) {
        return Malformed("inline data beyond the header end", reader.position());
      }
      message.inline_data.clear();  // the last occurrence wins, as in protobuf
      message.has_inline_data = true;
      TENSORD_RETURN_IF_ERROR(reader.TakeSpans(data_size, message.inline_data));
      continue;
    }
    TENSORD_RETURN_IF_ERROR(SkipField(reader, wire_type));
    if (reader.remaining() < end_remaining) {
      return Malformed("header field beyond the header end", reader.position());
    }
    PieceReader copy = field_start;
    TENSORD_RETURN_IF_ERROR(
        copy.AppendTo(reader.position() - field_start.position(), message.header));
  }
  return absl::OkStatus();
}

}  // namespace

size_t EncodeChunkPrefix(uint64_t offset, uint64_t data_size, uint8_t* out) {
  const uint64_t chunk_size = 1 + VarintSize(offset) + 1 + VarintSize(data_size) + data_size;
  size_t n = 0;
  out[n++] = (kChunkField << 3) | kWireLengthDelimited;
  n += PutVarint(chunk_size, out + n);
  out[n++] = (kChunkOffsetField << 3) | kWireVarint;
  n += PutVarint(offset, out + n);
  out[n++] = (kChunkDataField << 3) | kWireLengthDelimited;
  n += PutVarint(data_size, out + n);
  return n;
}

size_t EncodeHeaderFraming(uint64_t header_size, uint8_t* out) {
  out[0] = (kHeaderField << 3) | kWireLengthDelimited;
  return 1 + PutVarint(header_size, out + 1);
}

size_t EncodeInlineDataFraming(uint64_t data_size, uint8_t* out) {
  out[0] = (kInlineDataField << 3) | kWireLengthDelimited;
  return 1 + PutVarint(data_size, out + 1);
}

absl::Status DecodeStreamMessage(std::span<const std::span<const uint8_t>> pieces,
                                 StreamMessage& message, HeaderInlineData inline_data) {
  message.kind = StreamMessage::Kind::kEmpty;
  message.header.clear();
  message.has_inline_data = false;
  message.inline_data.clear();
  message.chunk_offset = 0;
  message.chunk_size = 0;
  message.chunk_pieces.clear();

  PieceReader reader(pieces);
  while (reader.remaining() > 0) {
    uint32_t field = 0, wire_type = 0;
    TENSORD_RETURN_IF_ERROR(ReadTag(reader, field, wire_type));
    if ((field == kHeaderField || field == kChunkField) && wire_type == kWireLengthDelimited) {
      StreamMessage::Kind kind =
          field == kHeaderField ? StreamMessage::Kind::kHeader : StreamMessage::Kind::kChunk;
      if (message.kind != StreamMessage::Kind::kEmpty) {
        return Malformed("message carries more than one header or chunk", reader.position());
      }
      message.kind = kind;
      uint64_t size = 0;
      TENSORD_RETURN_IF_ERROR(reader.ReadLength(size));
      if (size > reader.remaining())
        return Malformed("length beyond the message end", reader.position());
      if (kind == StreamMessage::Kind::kHeader) {
        if (size > kMaxStreamHeaderBytes) {
          return absl::InvalidArgumentError(absl::StrCat(
              "stream header is ", size, " bytes; the limit is ", kMaxStreamHeaderBytes));
        }
        if (inline_data == HeaderInlineData::kLift) {
          TENSORD_RETURN_IF_ERROR(LiftInlineData(reader, size, message));
        } else {
          TENSORD_RETURN_IF_ERROR(reader.CopyTo(size, message.header));
        }
      } else {
        TENSORD_RETURN_IF_ERROR(DecodeChunk(reader, size, message));
      }
    } else {
      TENSORD_RETURN_IF_ERROR(SkipField(reader, wire_type));
    }
  }
  return absl::OkStatus();
}

}  // namespace tensord
