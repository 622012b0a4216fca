// A v1::TensorInfo as its fields arrive, parsed by hand from the wire
// (Stat answers and fetch headers: once per small call on the client, where
// the generated parser and its message cost about 3,500 instructions).
// The parse follows protobuf's rules exactly: scalars and strings the last
// occurrence wins, submessages merge, repeated int64 packed or not, unknown
// fields (groups too) skipped, proto3 strings must be UTF-8, and what
// protobuf refuses is refused. wire_tensor_info_fuzz holds it to the
// generated parser on every input.
#ifndef TENSORD_SERVICE_WIRE_WIRE_TENSOR_INFO_H_
#define TENSORD_SERVICE_WIRE_WIRE_TENSOR_INFO_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensord/v1/handoff.pb.h"

namespace tensord {

struct WireLayout {
  bool has_dtype = false;
  uint32_t dtype_code = 0;
  uint32_t dtype_bits = 0;
  uint32_t dtype_lanes = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  uint64_t byte_offset = 0;
  bool has_device = false;
  int32_t device_type = 0;
  int32_t device_id = 0;
  bool operator==(const WireLayout&) const = default;
};

// Its members are tensor_info_fields.h's table, by name.
struct WireTensorInfo {
  std::string name;
  uint64_t version = 0;
  WireLayout layout;
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
  int64_t created_unix_nanos = 0;
  uint64_t open_leases = 0;
  int32_t retention = 0;
  std::string node;
  bool operator==(const WireTensorInfo&) const = default;
};

// A Fetch stream whose header names version 0 is a copy passed on as it
// arrived from another node, numbered only once whole: the number comes
// in this trailing metadata entry, in decimal, with the stream's OK.
inline constexpr char kNumberedVersionTrailer[] = "tensord-version";

struct WireFetchHeader {
  WireTensorInfo info;
  uint64_t range_offset = 0;
  uint64_t range_length = 0;
  bool split = false;
  // inline_data (field 3), the last occurrence, viewed in the parsed bytes.
  bool has_inline_data = false;
  std::span<const uint8_t> inline_data;
};

// A v1::BatchFetchItem (a BatchFetch answer holds many, each parsed on
// its own by service/wire/batch_fetch_items.h).
struct WireBatchFetchItem {
  uint32_t index = 0;
  bool has_status = false;
  int32_t status_code = 0;
  std::string status_message;
  bool has_info = false;
  WireTensorInfo info;
  // inline_data (field 4), the last occurrence, viewed in the parsed bytes.
  bool has_inline_data = false;
  std::span<const uint8_t> inline_data;
};

// A v1::AcquiredItem of a batch acquire's answer on the handoff socket
// (service/wire/handoff_batch_answer.h finds them in a packet), its
// AcquireResponse's fields flattened in.
struct WireAcquiredItem {
  uint32_t index = 0;
  bool has_status = false;
  int32_t status_code = 0;
  std::string status_message;
  bool use_remote = false;
  bool has_acquire = false;
  // AcquireResponse's fields.
  bool has_info = false;
  WireTensorInfo info;
  uint64_t lease_id = 0;
  uint64_t mapping_bytes = 0;
  uint64_t mapping_offset = 0;
  uint64_t arena_id = 0;
  bool has_device_handle = false;
  v1::DeviceHandle device_handle;  // rare (device versions): the generated message
  bool fd_attached = false;
};

// Each returns false where the generated parser's ParseFromArray would
// (malformed or truncated bytes, a string that is not UTF-8); `out` starts
// from its defaults, and its contents are unspecified after a failure.
bool ParseWireTensorInfo(std::span<const uint8_t> bytes, WireTensorInfo& out);
// v1::StatResponse: its info.
bool ParseWireStatResponse(std::span<const uint8_t> bytes, WireTensorInfo& out);
// v1::FetchHeader. Its inline_data views `bytes`, which must outlive it.
bool ParseWireFetchHeader(std::span<const uint8_t> bytes, WireFetchHeader& out);
// v1::FetchResponse, a FetchInline answer read whole (no stream decoder, no
// copy of the header): `has_header` says whether its oneof ends holding the
// header, and `header` is meaningful only then. As protobuf does, a header
// merges into an earlier one, a chunk replaces it (and is checked, not
// kept), and a header after a chunk starts afresh.
bool ParseWireFetchResponse(std::span<const uint8_t> bytes, WireFetchHeader& header,
                            bool& has_header);

// v1::BatchFetchItem, enclosed in `nesting` messages (which count
// against protobuf's recursion limit). `out` is reset first, keeping its
// strings' and vectors' memory; its inline_data views `bytes`.
bool ParseWireBatchFetchItem(std::span<const uint8_t> bytes, int nesting, WireBatchFetchItem& out);

// v1::AcquiredItem, enclosed in `nesting` messages. `out` is reset first,
// keeping its strings' and vectors' memory.
bool ParseWireAcquiredItem(std::span<const uint8_t> bytes, int nesting, WireAcquiredItem& out);

// A v1::TensorLayout's fields merged into `out` (a later occurrence of a
// layout merges into an earlier one), `depth` levels of protobuf's
// recursion limit left at the layout's own level.
bool ParseWireLayout(std::span<const uint8_t> bytes, int depth, WireLayout& out);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_WIRE_TENSOR_INFO_H_
