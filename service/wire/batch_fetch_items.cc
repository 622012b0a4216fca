#include "service/wire/batch_fetch_items.h"

#include "service/common/status_macros.h"
#include "service/wire/piece_reader.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// tensor_service.proto's numbers.
constexpr uint32_t kChunkField = 2;                // BatchFetchResponse.chunk
constexpr uint32_t kResponseItemsField = 3;        // BatchFetchResponse.items
constexpr uint32_t kBatchFetchItemsItemField = 1;  // BatchFetchItems.items
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
    TENSORD_RETURN_IF_ERROR(ReadRepeatedItems(
        reader, kBatchFetchItemsItemField, joined_,
        [this, on_item](std::span<const uint8_t> bytes, uint64_t start) -> absl::Status {
          if (!ParseWireBatchFetchItem(bytes, kItemNesting, item_)) {
            return Malformed("malformed batch fetch item", start);
          }
          return on_item(item_);
        }));
  }
  return absl::OkStatus();
}

}  // namespace tensord
