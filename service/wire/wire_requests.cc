#include "service/wire/wire_requests.h"

#include "service/wire/wire_reader.h"

namespace tensord {

using namespace wire_reader;

bool ParseWireStatRequest(std::span<const uint8_t> bytes, WireStatRequest& out) {
  return ParseFields(bytes, kRecursionLimit, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited): return ViewString(reader, out.name);
      case Tag(2, kWireVarint): return ParseVarintAs(reader, out.version);
      default: known = false; return true;
    }
  });
}

bool ParseWireFetchRequest(std::span<const uint8_t> bytes, WireFetchRequest& out) {
  constexpr int depth = kRecursionLimit;
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited): return ViewString(reader, out.name);
      case Tag(2, kWireVarint): return ParseVarintAs(reader, out.version);
      case Tag(3, kWireLengthDelimited):  // range: offset = 1, length = 2
        out.has_range = true;
        return ParseByteRangeField(reader, depth, out.range_offset, out.range_length);
      case Tag(4, kWireVarint): return ParseVarintAs(reader, out.max_chunk_bytes);
      case Tag(5, kWireVarint): return ParseVarintAs(reader, out.split_above_bytes);
      case Tag(6, kWireVarint): return ParseVarintAs(reader, out.cluster_origin);
      default: known = false; return true;
    }
  });
}

bool ParseWireBatchFetchRequest(std::span<const uint8_t> bytes, WireBatchFetchRequest& out) {
  out = WireBatchFetchRequest();
  constexpr int depth = kRecursionLimit;
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited):  // items: NameVersion, name = 1, version = 2
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          WireNameVersion& item = out.items.emplace_back();
          return ParseFields(payload, inner,
                             [&](Reader& fields, uint32_t item_tag, bool& item_known) {
                               switch (item_tag) {
                                 case Tag(1, kWireLengthDelimited):
                                   return ViewString(fields, item.name);
                                 case Tag(2, kWireVarint):
                                   return ParseVarintAs(fields, item.version);
                                 default: item_known = false; return true;
                               }
                             });
        });
      case Tag(2, kWireLengthDelimited): {  // prefix: set by any occurrence, the last kept
        absl::string_view prefix;
        if (!ViewString(reader, prefix)) return false;
        out.prefix = prefix;
        return true;
      }
      case Tag(3, kWireVarint): return ParseVarintAs(reader, out.group_version);
      case Tag(4, kWireVarint): return ParseVarintAs(reader, out.cluster_group);
      default: known = false; return true;
    }
  });
}

}  // namespace tensord
