#include "service/wire/handoff_batch_answer.h"

#include "service/wire/wire_reader.h"

namespace tensord {
namespace {

using namespace wire_reader;

// handoff.proto's numbers.
enum HandoffResponseField : uint32_t {
  kRequestId = 1,
  kCode = 2,
  kMessage = 3,
  kAcquire = 4,
  kCreate = 5,
  kSeal = 6,
  kUseRemote = 7,
  kAcquireMany = 8,
  kSealGroup = 9,
  kPutMany = 10,
};
enum AcquireManyResponseField : uint32_t { kItems = 1, kMore = 2 };

// AcquireManyResponse, merged into `out`: items appended, `more` the last
// occurrence's.
bool ParseAcquireMany(std::span<const uint8_t> bytes, int depth, WireBatchAnswer& out) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(kItems, kWireLengthDelimited): {
        std::span<const uint8_t> item;
        if (!reader.Payload(item)) return false;
        out.items.push_back(item);
        return true;
      }
      case Tag(kMore, kWireVarint): return ParseBool(reader, out.more);
      default: known = false; return true;
    }
  });
}

}  // namespace

bool ParseWireBatchAnswer(std::span<const uint8_t> packet, WireBatchAnswer& out) {
  out = WireBatchAnswer{};
  constexpr int depth = kRecursionLimit;
  return ParseFields(packet, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(kRequestId, kWireVarint): return ParseVarintAs(reader, out.request_id);
      case Tag(kCode, kWireVarint): return ParseVarintAs(reader, out.code);
      case Tag(kMessage, kWireLengthDelimited): return ParseString(reader, out.message);
      case Tag(kUseRemote, kWireVarint): return ParseBool(reader, out.use_remote);
      case Tag(kAcquireMany, kWireLengthDelimited):
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseAcquireMany(payload, inner, out);
        });
      case Tag(kAcquire, kWireLengthDelimited):
      case Tag(kCreate, kWireLengthDelimited):
      case Tag(kSeal, kWireLengthDelimited):
      case Tag(kSealGroup, kWireLengthDelimited):
      case Tag(kPutMany, kWireLengthDelimited): return false;  // another answer
      default: known = false; return true;
    }
  });
}

}  // namespace tensord
