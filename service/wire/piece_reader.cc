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

}  // namespace tensord
