// Decodes the BatchPutRequest messages that are not a header or a chunk
// (stream_message.h reads those): options (field 3), or whole small items
// (field 4, BatchPutItems), straight from the received pieces: each item is parsed
// where it lies and its bytes are viewed in place, so the server copies
// them once, into the version's buffer. The generated parser copied each
// message whole (flattening gRPC's slices), then every item's bytes into a
// string: two copies and a message per item, a third of the server's CPU
// in a BatchPut of 1024 x 4 KiB (perf). Parses untrusted input
// (wire_tensor_info_fuzz and stream_message_fuzz hold it to the generated
// parser).
#ifndef TENSORD_SERVICE_WIRE_BATCH_PUT_ITEMS_H_
#define TENSORD_SERVICE_WIRE_BATCH_PUT_ITEMS_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/wire/piece_reader.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {

// One v1::BatchPutItem as it arrived.
struct WireBatchPutItem {
  // Each occurrence of the header (field 1), in order: protobuf parses
  // each on its own and merges them (a parse of their bytes joined is not
  // the same: an occurrence cut inside a field would be completed by the
  // next one). Viewed in the parsed bytes.
  absl::InlinedVector<std::span<const uint8_t>, 1> headers;
  // data (field 2), the last occurrence, viewed in the parsed bytes.
  std::span<const uint8_t> data;
};

// v1::BatchPutItem, enclosed in `nesting` messages (which count against
// protobuf's recursion limit): false where the generated parser's
// ParseFromArray would be, the header aside (ParseBatchPutHeader parses
// it).
bool ParseWireBatchPutItem(std::span<const uint8_t> bytes, int nesting, WireBatchPutItem& out);

// The item's header into `out` (cleared first; every occurrence merged),
// as the generated parser reads it inside an item enclosed in `nesting`
// messages: false where that parse would fail.
bool ParseBatchPutHeader(const WireBatchPutItem& item, int nesting, v1::PutHeader& out);

// Not thread-safe; reuse one per stream.
class BatchPutItemsDecoder {
 public:
  // An item lies inside the request and its BatchPutItems.
  static constexpr int kItemNesting = 2;
  using OnItem = absl::FunctionRef<absl::Status(const WireBatchPutItem& item)>;

  // What a message was.
  struct Message {
    bool has_options = false;
    bool atomic = false;  // BatchPutOptions.atomic
    bool has_items = false;
  };

  // Calls `on_item` for every item of the message whose bytes are the
  // concatenation of `pieces`, in order, and stops at the first error it
  // returns; an item's spans are valid only during its call.
  // INVALID_ARGUMENT for what the generated parser refuses, and for what a
  // tensord client never sends: options and items in one message (protobuf
  // would keep whichever of the oneof came last), and groups outside the
  // items.
  absl::StatusOr<Message> Decode(std::span<const std::span<const uint8_t>> pieces, OnItem on_item);

 private:
  absl::Status ReadOptions(PieceReader& reader, Message& message);

  // An item whose bytes cross a piece boundary, copied whole.
  std::string item_bytes_;
  WireBatchPutItem item_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_BATCH_PUT_ITEMS_H_
