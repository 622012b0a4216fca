// Requests parsed by hand on the server, with protobuf's rules
// (wire_reader.h): names are viewed in the received bytes, not copied into
// a message. For the small unary calls (Stat, FetchInline) the generated
// parse and the message's free were a fifth of what tensord added to a
// Stat on the server; a BatchFetch of a thousand names made a string on
// the heap for each, and so did the handoff's put_many. wire_tensor_info_fuzz holds them to the
// generated parser.
#ifndef TENSORD_SERVICE_WIRE_WIRE_REQUESTS_H_
#define TENSORD_SERVICE_WIRE_WIRE_REQUESTS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/wire/wire_tensor_info.h"

namespace tensord {

struct WireStatRequest {
  absl::string_view name;  // into the parsed bytes
  uint64_t version = 0;
};

// False where v1::StatRequest::ParseFromArray would be.
bool ParseWireStatRequest(std::span<const uint8_t> bytes, WireStatRequest& out);

struct WireFetchRequest {
  absl::string_view name;  // into the parsed bytes
  uint64_t version = 0;
  bool has_range = false;
  uint64_t range_offset = 0;
  uint64_t range_length = 0;
  uint32_t max_chunk_bytes = 0;
  uint64_t split_above_bytes = 0;
  int64_t cluster_origin = 0;
};

// False where v1::FetchRequest::ParseFromArray would be.
bool ParseWireFetchRequest(std::span<const uint8_t> bytes, WireFetchRequest& out);

struct WireNameVersion {
  absl::string_view name;  // into the parsed bytes
  uint64_t version = 0;
};

struct WireBatchFetchRequest {
  std::vector<WireNameVersion> items;
  std::optional<absl::string_view> prefix;  // into the parsed bytes
  uint64_t group_version = 0;
  uint64_t cluster_group = 0;
};

// False where v1::BatchFetchRequest::ParseFromArray would be. `out` starts
// empty.
bool ParseWireBatchFetchRequest(std::span<const uint8_t> bytes, WireBatchFetchRequest& out);

// One v1::PutManyItem (handoff.proto).
struct WirePutManyItem {
  absl::string_view name;  // into the parsed bytes
  WireLayout layout;       // its defaults (no dtype) when the item has none
  uint64_t total_bytes = 0;
  int32_t retention = 0;
  std::optional<uint32_t> crc32c;
  uint64_t offset = 0;
};

// A v1::HandoffRequest whose kind is put_many (a local batch put).
struct WirePutManyRequest {
  uint64_t request_id = 0;
  std::vector<uint64_t> release_lease_ids;
  std::vector<WirePutManyItem> items;
  bool atomic = false;
};

// True where v1::HandoffRequest::ParseFromArray would succeed with put_many
// its kind, `out` then holding what that parse holds. False for a packet
// it would refuse and for any packet naming another kind (whichever comes
// last): the caller parses those with protobuf. The generated parse made a
// message, a name string and a layout per item: a tenth of the server's
// work in a local batch put of 4 KiB tensors. `out` starts empty.
bool ParseWirePutManyRequest(std::span<const uint8_t> bytes, WirePutManyRequest& out);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_WIRE_REQUESTS_H_
