#include "service/wire/batch_fetch_items.h"

#include "service/common/status_macros.h"
#include "service/wire/piece_reader.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// tensor_service.proto's numbers.
constexpr uint32_t kChunkField = 2;          // BatchFetchResponse.chunk
constexpr uint32_t kResponseItemsField = 3;  // BatchFetchResponse.items
constexpr uint32_t kItemsItemField = 1;      // BatchFetchItems.items
// An item lies inside the response and its BatchFetchItems.
constexpr int kItemNesting = 2;

}  // namespace

absl::Status BatchFetchItemsDecoder::Decode(std::span<const std::span<const uint8_t>> pieces,
                                            OnItem on_item) {
  PieceReader reader(pieces);
  while (reader.remaining() > 0) {
    uint32_t field = 0, wire_type = 0;
    TENSORD_RETURN_IF_ERROR(ReadTag(reader, field, wire_type));
    if (field == kChunkField && wire_type == kWireLengthDelimited) {
      return Malformed("batch fetch message carries a chunk and items", reader.position());
    }
    if (field != kResponseItemsField || wire_type != kWireLengthDelimited) {
      TENSORD_RETURN_IF_ERROR(SkipField(reader, wire_type));
      continue;
    }
    uint64_t items_size = 0;
    TENSORD_RETURN_IF_ERROR(reader.ReadLength(items_size));
    if (items_size > reader.remaining()) {
      return Malformed("items beyond the message end", reader.position());
    }
    const uint64_t end_remaining = reader.remaining() - items_size;
    while (reader.remaining() > end_remaining) {
      TENSORD_RETURN_IF_ERROR(ReadTag(reader, field, wire_type));
      if (field != kItemsItemField || wire_type != kWireLengthDelimited) {
        TENSORD_RETURN_IF_ERROR(SkipField(reader, wire_type));
      } else {
        uint64_t item_size = 0;
        TENSORD_RETURN_IF_ERROR(reader.ReadLength(item_size));
        if (item_size > reader.remaining() - end_remaining) {
          return Malformed("item beyond the items' end", reader.position());
        }
        const uint64_t item_start = reader.position();
        std::span<const uint8_t> item_bytes;
        if (!reader.ViewWithinPiece(item_size, item_bytes)) {
          TENSORD_RETURN_IF_ERROR(reader.CopyTo(item_size, joined_));
          item_bytes = {reinterpret_cast<const uint8_t*>(joined_.data()), joined_.size()};
        }
        if (!ParseWireBatchFetchItem(item_bytes, kItemNesting, item_)) {
          return Malformed("malformed batch fetch item", item_start);
        }
        TENSORD_RETURN_IF_ERROR(on_item(item_));
      }
      if (reader.remaining() < end_remaining) {
        return Malformed("items field beyond the items' end", reader.position());
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tensord
