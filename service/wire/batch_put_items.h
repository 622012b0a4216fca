// Decodes the BatchPutRequest messages that are not a header or a chunk
// (stream_message.h reads those): options (field 3), or whole small items
// (field 4, BatchPutItems), straight from the received pieces: each item is parsed
// where it lies and its bytes are viewed in place, so the server copies
// them once, into the version's buffer. The generated parser copied each
// message whole (flattening gRPC's slices), then every item's bytes into a
// string: two copies and a message per item, a third of the server's CPU
// in a BatchPut of 1024 x 4 KiB (perf). Item headers, and a chunked item's
// header as the stream decoder hands it over, are parsed by hand too
// (WirePutHeader). Parses untrusted input (wire_tensor_info_fuzz and
// stream_message_fuzz hold it to the generated parser).
#ifndef TENSORD_SERVICE_WIRE_BATCH_PUT_ITEMS_H_
#define TENSORD_SERVICE_WIRE_BATCH_PUT_ITEMS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/wire/piece_reader.h"
#include "service/wire/wire_tensor_info.h"

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

// A v1::PutHeader as its fields arrive: strings viewed in the parsed bytes.
struct WirePutPart {
  absl::string_view upload_id;
  uint32_t parts = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};
struct WirePutHeader {
  absl::string_view name;
  WireLayout layout;  // its defaults (no dtype) when the header has none
  uint64_t total_bytes = 0;
  std::optional<uint32_t> crc32c;
  int32_t retention = 0;
  uint32_t replicas = 0;
  std::optional<WirePutPart> part;
};

// A PutHeader sent as a message of its own (a chunked item's) into `out`,
// reset first: false where the generated parser would fail.
bool ParseWirePutHeader(std::span<const uint8_t> bytes, WirePutHeader& out);

// The item's header into `out` (reset first; every occurrence merged), as
// the generated parser reads it inside an item enclosed in `nesting`
// messages: false where that parse would fail. The generated parse and
// its message were a tenth of the server's work per item in a BatchPut of
// 1024 x 4 KiB.
bool ParseBatchPutHeader(const WireBatchPutItem& item, int nesting, WirePutHeader& out);

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
