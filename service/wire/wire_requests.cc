#include "service/wire/wire_requests.h"

#include "service/wire/wire_reader.h"

namespace tensord {

bool ParseWireStatRequest(std::span<const uint8_t> bytes, WireStatRequest& out) {
  using namespace wire_reader;
  return ParseFields(bytes, kRecursionLimit, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited): {  // name: a proto3 string, UTF-8
        std::span<const uint8_t> payload;
        if (!reader.Payload(payload) || !IsValidUtf8(payload)) return false;
        out.name = absl::string_view(reinterpret_cast<const char*>(payload.data()), payload.size());
        return true;
      }
      case Tag(2, kWireVarint): return ParseVarintAs(reader, out.version);
      default: known = false; return true;
    }
  });
}

}  // namespace tensord
