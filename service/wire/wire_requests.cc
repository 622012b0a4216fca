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

}  // namespace tensord
