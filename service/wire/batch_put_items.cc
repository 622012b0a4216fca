#include "service/wire/batch_put_items.h"

#include "service/common/status_macros.h"
#include "service/wire/piece_reader.h"
#include "service/wire/varint.h"
#include "service/wire/wire_reader.h"

namespace tensord {
namespace {

// tensor_service.proto's numbers.
constexpr uint32_t kOptionsField = 3;            // BatchPutRequest.options
constexpr uint32_t kRequestItemsField = 4;       // BatchPutRequest.items
constexpr uint32_t kBatchPutItemsItemField = 1;  // BatchPutItems.items

}  // namespace

bool ParseWireBatchPutItem(std::span<const uint8_t> bytes, int nesting, WireBatchPutItem& out) {
  using namespace wire_reader;
  out.headers.clear();
  out.data = {};
  const int depth = kRecursionLimit - nesting;
  if (depth < 0) return false;
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited): {
        std::span<const uint8_t> payload;
        if (!reader.Payload(payload)) return false;
        out.headers.push_back(payload);
        return true;
      }
      case Tag(2, kWireLengthDelimited): return reader.Payload(out.data);  // bytes: no UTF-8 rule
      default: known = false; return true;
    }
  });
}

namespace {

// A PutHeader's bytes merged into `out` (scalars and strings: the last
// occurrence wins; the layout and the part merge), `depth` levels of
// protobuf's recursion limit left at the header's own level.
bool MergeWirePutHeader(std::span<const uint8_t> bytes, int depth, WirePutHeader& out) {
  using namespace wire_reader;
  if (depth < 0) return false;
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited): return ViewString(reader, out.name);
      case Tag(2, kWireLengthDelimited):
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseWireLayout(payload, inner, out.layout);
        });
      case Tag(3, kWireVarint): return ParseVarintAs(reader, out.total_bytes);
      case Tag(4, kWireVarint): return ParseVarintAs(reader, out.crc32c.emplace());
      case Tag(5, kWireVarint): return ParseVarintAs(reader, out.retention);
      case Tag(6, kWireVarint): return ParseVarintAs(reader, out.replicas);
      case Tag(7, kWireLengthDelimited): {
        WirePutPart& part = out.part.has_value() ? *out.part : out.part.emplace();
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseFields(payload, inner,
                             [&](Reader& fields, uint32_t part_tag, bool& part_known) {
                               switch (part_tag) {
                                 case Tag(1, kWireLengthDelimited):
                                   return ViewString(fields, part.upload_id);
                                 case Tag(2, kWireVarint): return ParseVarintAs(fields, part.parts);
                                 case Tag(3, kWireVarint):
                                   return ParseVarintAs(fields, part.offset);
                                 case Tag(4, kWireVarint):
                                   return ParseVarintAs(fields, part.length);
                                 default: part_known = false; return true;
                               }
                             });
        });
      }
      default: known = false; return true;
    }
  });
}

}  // namespace

bool ParseWirePutHeader(std::span<const uint8_t> bytes, WirePutHeader& out) {
  out = WirePutHeader();
  return MergeWirePutHeader(bytes, wire_reader::kRecursionLimit, out);
}

bool ParseBatchPutHeader(const WireBatchPutItem& item, int nesting, WirePutHeader& out) {
  out = WirePutHeader();
  // The item and the messages around it are as deep as the header starts.
  const int depth = wire_reader::kRecursionLimit - nesting - 1;
  for (std::span<const uint8_t> occurrence : item.headers) {
    if (!MergeWirePutHeader(occurrence, depth, out)) return false;
  }
  return true;
}

absl::Status BatchPutItemsDecoder::ReadOptions(PieceReader& reader, Message& message) {
  uint64_t size = 0;
  const uint64_t start = reader.position();
  TENSORD_RETURN_IF_ERROR(reader.ReadLength(size));
  TENSORD_RETURN_IF_ERROR(reader.CopyTo(size, item_bytes_));
  using namespace wire_reader;
  const bool parsed =
      ParseFields({reinterpret_cast<const uint8_t*>(item_bytes_.data()), item_bytes_.size()},
                  kRecursionLimit - 1, [&](Reader& options, uint32_t tag, bool& known) {
                    if (tag != Tag(1, kWireVarint)) {
                      known = false;
                      return true;
                    }
                    uint64_t atomic = 0;
                    if (!options.Varint(atomic)) return false;
                    message.atomic = atomic != 0;  // a bool: any nonzero varint, the last one wins
                    return true;
                  });
  if (!parsed) return Malformed("malformed batch put options", start);
  message.has_options = true;
  return absl::OkStatus();
}

absl::StatusOr<BatchPutItemsDecoder::Message> BatchPutItemsDecoder::Decode(
    std::span<const std::span<const uint8_t>> pieces, OnItem on_item) {
  Message message;
  PieceReader reader(pieces);
  while (reader.remaining() > 0) {
    uint32_t field = 0, wire_type = 0;
    TENSORD_RETURN_IF_ERROR(ReadTag(reader, field, wire_type));
    const bool length_delimited = wire_type == kWireLengthDelimited;
    if (length_delimited && field < kOptionsField) {
      return Malformed("a header or chunk is not a batch put message of options or items",
                       reader.position());
    }
    if (length_delimited && (field == kOptionsField || field == kRequestItemsField)) {
      if ((field == kOptionsField && message.has_items) ||
          (field == kRequestItemsField && message.has_options)) {
        return Malformed("batch put message carries both options and items", reader.position());
      }
    }
    if (length_delimited && field == kOptionsField) {
      TENSORD_RETURN_IF_ERROR(ReadOptions(reader, message));
      continue;
    }
    if (!length_delimited || field != kRequestItemsField) {
      TENSORD_RETURN_IF_ERROR(SkipField(reader, wire_type));
      continue;
    }
    message.has_items = true;
    TENSORD_RETURN_IF_ERROR(ReadRepeatedItems(
        reader, kBatchPutItemsItemField, item_bytes_,
        [this, on_item](std::span<const uint8_t> bytes, uint64_t start) -> absl::Status {
          if (!ParseWireBatchPutItem(bytes, kItemNesting, item_)) {
            return Malformed("malformed batch put item", start);
          }
          return on_item(item_);
        }));
  }
  return message;
}

}  // namespace tensord
