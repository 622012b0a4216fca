#include "service/wire/stream_message.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/common/status_macros.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

constexpr uint32_t kHeaderField = 1;
constexpr uint32_t kChunkField = 2;
constexpr uint32_t kChunkOffsetField = 1;
constexpr uint32_t kChunkDataField = 2;
constexpr uint32_t kInlineDataField = 3;  // FetchHeader.inline_data

absl::Status Malformed(absl::string_view what, uint64_t position) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed stream message: ", what, " at byte ", position));
}

// Reads forward through a list of byte pieces as if they were one buffer.
class PieceReader {
 public:
  explicit PieceReader(std::span<const std::span<const uint8_t>> pieces) : pieces_(pieces) {
    for (const auto& piece : pieces) remaining_ += piece.size();
    SkipEmptyPieces();
  }

  uint64_t position() const { return position_; }
  uint64_t remaining() const { return remaining_; }

  absl::Status ReadVarint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (remaining_ == 0) return Malformed("truncated varint", position_);
      uint8_t byte = pieces_[piece_][offset_];
      Advance(1);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        if (shift == 63 && byte > 1) return Malformed("varint overflows 64 bits", position_);
        return absl::OkStatus();
      }
    }
    return Malformed("varint longer than 10 bytes", position_);
  }

  // The length of a length-delimited field, read as protobuf does.
  absl::Status ReadLength(uint64_t& value) {
    const uint64_t start = position_;
    TENSORD_RETURN_IF_ERROR(ReadVarint(value));
    if (position_ - start > kMaxLengthVarintBytes) {
      return Malformed("length longer than 5 bytes", start);
    }
    if (value > kMaxLength) return Malformed("length of 2 GiB or more", start);
    return absl::OkStatus();
  }

  // Hands out the next `size` bytes as spans into the pieces.
  absl::Status TakeSpans(uint64_t size, BytePieces& spans) {
    if (size > remaining_) return Malformed("length beyond the message end", position_);
    while (size > 0) {
      const auto& piece = pieces_[piece_];
      uint64_t n = std::min<uint64_t>(size, piece.size() - offset_);
      spans.push_back(piece.subspan(offset_, n));
      Advance(n);
      size -= n;
    }
    return absl::OkStatus();
  }

  absl::Status CopyTo(uint64_t size, std::string& out) {
    out.clear();
    out.reserve(size);
    return AppendTo(size, out);
  }

  absl::Status AppendTo(uint64_t size, std::string& out) {
    if (size > remaining_) return Malformed("length beyond the message end", position_);
    while (size > 0) {
      const auto& piece = pieces_[piece_];
      uint64_t n = std::min<uint64_t>(size, piece.size() - offset_);
      out.append(reinterpret_cast<const char*>(piece.data() + offset_), n);
      Advance(n);
      size -= n;
    }
    return absl::OkStatus();
  }

  absl::Status Skip(uint64_t size) {
    if (size > remaining_) return Malformed("length beyond the message end", position_);
    while (size > 0) {
      uint64_t n = std::min<uint64_t>(size, pieces_[piece_].size() - offset_);
      Advance(n);
      size -= n;
    }
    return absl::OkStatus();
  }

 private:
  void Advance(uint64_t n) {
    offset_ += n;
    position_ += n;
    remaining_ -= n;
    SkipEmptyPieces();
  }
  void SkipEmptyPieces() {
    while (piece_ < pieces_.size() && offset_ == pieces_[piece_].size()) {
      ++piece_;
      offset_ = 0;
    }
  }

  std::span<const std::span<const uint8_t>> pieces_;
  size_t piece_ = 0;
  uint64_t offset_ = 0;
  uint64_t position_ = 0;
  uint64_t remaining_ = 0;
};

// Skips a field of an unknown number, as protobuf parsers must.
absl::Status SkipField(PieceReader& reader, uint32_t wire_type) {
  uint64_t ignored = 0;
  switch (wire_type) {
    case kWireVarint: return reader.ReadVarint(ignored);
    case kWireFixed64: return reader.Skip(8);
    case kWireFixed32: return reader.Skip(4);
    case kWireLengthDelimited:
      TENSORD_RETURN_IF_ERROR(reader.ReadLength(ignored));
      return reader.Skip(ignored);
    default: return Malformed(absl::StrCat("unsupported wire type ", wire_type), reader.position());
  }
}

absl::Status ReadTag(PieceReader& reader, uint32_t& field, uint32_t& wire_type) {
  uint64_t tag = 0;
  const uint64_t start = reader.position();
  TENSORD_RETURN_IF_ERROR(reader.ReadVarint(tag));
  // A tag is a 32-bit varint: protobuf refuses one written in more bytes.
  if (reader.position() - start > 5) return Malformed("tag longer than 5 bytes", start);
  field = static_cast<uint32_t>(tag >> 3);
  wire_type = static_cast<uint32_t>(tag & 7);
  if (field == 0 || (tag >> 3) > 0x1fffffff)
    return Malformed("invalid field number", reader.position());
  return absl::OkStatus();
}

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
