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

namespace {

// handoff.proto's numbers.
enum PutManyWireField : uint32_t {
  kRequestId = 1,
  kFirstOtherKind = 2,  // acquire .. seal_group: 2..10
  kLastOtherKind = 10,
  kReleaseLeaseIds = 11,
  kPutMany = 12,
  kPutManyItems = 1,
  kPutManyAtomic = 2,
};

bool ParsePutManyItem(std::span<const uint8_t> bytes, int depth, WirePutManyItem& item) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited): return ViewString(reader, item.name);
      case Tag(2, kWireLengthDelimited):  // occurrences merge
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseWireLayout(payload, inner, item.layout);
        });
      case Tag(3, kWireVarint): return ParseVarintAs(reader, item.total_bytes);
      case Tag(4, kWireVarint): return ParseVarintAs(reader, item.retention);
      case Tag(5, kWireVarint): return ParseVarintAs(reader, item.crc32c.emplace());
      case Tag(6, kWireVarint): return ParseVarintAs(reader, item.offset);
      default: known = false; return true;
    }
  });
}

// One occurrence of put_many, merged into `out` (items appended).
bool MergePutMany(std::span<const uint8_t> bytes, int depth, WirePutManyRequest& out) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(kPutManyItems, kWireLengthDelimited):
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParsePutManyItem(payload, inner, out.items.emplace_back());
        });
      case Tag(kPutManyAtomic, kWireVarint): return ParseBool(reader, out.atomic);
      default: known = false; return true;
    }
  });
}

}  // namespace

bool ParseWirePutManyRequest(std::span<const uint8_t> bytes, WirePutManyRequest& out) {
  out = WirePutManyRequest();
  constexpr int depth = kRecursionLimit;
  bool has_put_many = false;
  const bool parsed = ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    const uint32_t field = tag >> 3;
    if (field >= kFirstOtherKind && field <= kLastOtherKind) {
      return false;  // another kind, set or merely named: protobuf decides
    }
    switch (tag) {
      case Tag(kRequestId, kWireVarint): return ParseVarintAs(reader, out.request_id);
      case Tag(kReleaseLeaseIds, kWireVarint):
      case Tag(kReleaseLeaseIds, kWireLengthDelimited):
        return ParseRepeatedVarints(reader, tag, out.release_lease_ids);
      case Tag(kPutMany, kWireLengthDelimited):
        has_put_many = true;
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return MergePutMany(payload, inner, out);
        });
      default: known = false; return true;
    }
  });
  return parsed && has_put_many;
}

}  // namespace tensord
