#include "service/wire/piece_reader.h"

#include "absl/strings/str_cat.h"

namespace tensord {

absl::Status Malformed(absl::string_view what, uint64_t position) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed stream message: ", what, " at byte ", position));
}

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

absl::Status ReadRepeatedItems(
    PieceReader& reader, uint32_t item_field, std::string& joined,
    absl::FunctionRef<absl::Status(std::span<const uint8_t> item, uint64_t start)> on_item) {
  uint64_t items_size = 0;
  TENSORD_RETURN_IF_ERROR(reader.ReadLength(items_size));
  if (items_size > reader.remaining()) {
    return Malformed("items beyond the message end", reader.position());
  }
  const uint64_t end_remaining = reader.remaining() - items_size;
  while (reader.remaining() > end_remaining) {
    uint32_t field = 0, wire_type = 0;
    TENSORD_RETURN_IF_ERROR(ReadTag(reader, field, wire_type));
    if (field != item_field || wire_type != kWireLengthDelimited) {
      TENSORD_RETURN_IF_ERROR(SkipField(reader, wire_type));
    } else {
      uint64_t item_size = 0;
      TENSORD_RETURN_IF_ERROR(reader.ReadLength(item_size));
      if (item_size > reader.remaining() - end_remaining) {
        return Malformed("item beyond the items' end", reader.position());
      }
      const uint64_t start = reader.position();
      std::span<const uint8_t> item;
      if (!reader.ViewWithinPiece(item_size, item)) {
        TENSORD_RETURN_IF_ERROR(reader.CopyTo(item_size, joined));
        item = {reinterpret_cast<const uint8_t*>(joined.data()), joined.size()};
      }
      TENSORD_RETURN_IF_ERROR(on_item(item, start));
    }
    if (reader.remaining() < end_remaining) {
      return Malformed("items field beyond the items' end", reader.position());
    }
  }
  return absl::OkStatus();
}

}  // namespace tensord
