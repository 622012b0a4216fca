// Reads a protobuf message whose bytes are spread over several received
// pieces (gRPC slices) as if they were one buffer, without copying them:
// the stream decoders' reader. Parses untrusted input: every read is
// checked against what is there, and fails with INVALID_ARGUMENT naming
// the byte.
#ifndef TENSORD_SERVICE_WIRE_PIECE_READER_H_
#define TENSORD_SERVICE_WIRE_PIECE_READER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/common/status_macros.h"
#include "service/wire/varint.h"

namespace tensord {

// Byte ranges of received slices; most messages have one or two, kept
// without an allocation (a decoder made per small fetch allocated here).
using BytePieces = absl::InlinedVector<std::span<const uint8_t>, 2>;

// INVALID_ARGUMENT: "malformed stream message: `what` at byte `position`".
absl::Status Malformed(absl::string_view what, uint64_t position);

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

  // The next `size` bytes viewed in place when they lie in one piece (and
  // then read); false, reading nothing, when they cross a piece boundary
  // or pass the end.
  bool ViewWithinPiece(uint64_t size, std::span<const uint8_t>& out) {
    if (size > remaining_) return false;
    if (size == 0) {
      out = {};
      return true;
    }
    const auto& piece = pieces_[piece_];
    if (size > piece.size() - offset_) return false;
    out = piece.subspan(offset_, size);
    Advance(size);
    return true;
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

// Skips a field of an unknown number, as protobuf parsers must; groups,
// which no tensord message has, are refused.
absl::Status SkipField(PieceReader& reader, uint32_t wire_type);

// A field's tag: its number (1 to 2^29-1) and wire type.
absl::Status ReadTag(PieceReader& reader, uint32_t& field, uint32_t& wire_type);

// A batch message's items field (BatchFetchItems, BatchPutItems), its tag
// read: calls `on_item` with the bytes of each `item_field` submessage, in
// order, viewed in place, or copied into `joined` when they cross a piece
// boundary, and with where they start; other fields are skipped. Stops at
// the first error `on_item` returns.
absl::Status ReadRepeatedItems(
    PieceReader& reader, uint32_t item_field, std::string& joined,
    absl::FunctionRef<absl::Status(std::span<const uint8_t> item, uint64_t start)> on_item);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_PIECE_READER_H_
