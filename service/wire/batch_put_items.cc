#include "service/wire/batch_put_items.h"

#include <google/protobuf/io/coded_stream.h>

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

bool ParseBatchPutHeader(const WireBatchPutItem& item, int nesting, v1::PutHeader& out) {
  out.Clear();
  for (std::span<const uint8_t> occurrence : item.headers) {
    google::protobuf::io::CodedInputStream input(occurrence.data(),
                                                 static_cast<int>(occurrence.size()));
    // The item and the messages around it are as deep as the header starts.
    input.SetRecursionLimit(wire_reader::kRecursionLimit - nesting - 1);
    if (!out.MergeFromCodedStream(&input) || !input.ConsumedEntireMessage()) return false;
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
