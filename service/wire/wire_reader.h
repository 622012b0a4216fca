// Protobuf's wire rules for the messages tensord parses by hand
// (wire_tensor_info, wire_requests): what the generated parser accepts is
// accepted, what it refuses is refused; and the one message both read, a
// ByteRange. Internal to service/wire.
#ifndef TENSORD_SERVICE_WIRE_WIRE_READER_H_
#define TENSORD_SERVICE_WIRE_WIRE_READER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/strings/string_view.h"
#include "service/common/utf8.h"
#include "service/wire/varint.h"

namespace tensord::wire_reader {

inline constexpr uint32_t kWireStartGroup = 3;
inline constexpr uint32_t kWireEndGroup = 4;
// Protobuf's default recursion limit: submessages and groups nested deeper
// than this fail its parse, so they fail this one.
inline constexpr int kRecursionLimit = 100;

constexpr uint32_t Tag(uint32_t field, uint32_t wire_type) { return (field << 3) | wire_type; }

// Reads one message's bytes front to back; every read fails (false) rather
// than pass the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes)
      : at_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return at_ == end_; }

  // Up to 10 bytes; bits past the 64th are dropped, as protobuf does.
  bool Varint(uint64_t& value) { return VarintOf(10, value); }

  // A tag: up to 5 bytes, kept modulo 2^32 (protobuf's ReadTag).
  bool Tag(uint32_t& tag) {
    uint64_t value = 0;
    if (!VarintOf(5, value)) return false;
    tag = static_cast<uint32_t>(value);
    return true;
  }

  // A length-delimited field's payload, its length read as protobuf does.
  bool Payload(std::span<const uint8_t>& payload) {
    uint64_t size = 0;
    if (!VarintOf(kMaxLengthVarintBytes, size) || size > kMaxLength) return false;
    if (size > static_cast<uint64_t>(end_ - at_)) return false;
    payload = std::span<const uint8_t>(at_, static_cast<size_t>(size));
    at_ += size;
    return true;
  }

  // A fixed64 field's value, little-endian.
  bool Fixed64(uint64_t& value) {
    if (end_ - at_ < 8) return false;
    value = 0;
    for (int i = 7; i >= 0; --i) value = (value << 8) | at_[i];
    at_ += 8;
    return true;
  }

  bool Skip(size_t bytes) {
    if (static_cast<size_t>(end_ - at_) < bytes) return false;
    at_ += bytes;
    return true;
  }

 private:
  bool VarintOf(int max_bytes, uint64_t& value) {
    // Most varints here (tags, small fields) are one byte.
    if (at_ != end_ && *at_ < 0x80) {
      value = *at_++;
      return true;
    }
    value = 0;
    for (int i = 0; i < max_bytes; ++i) {
      if (at_ == end_) return false;
      const uint8_t byte = *at_++;
      value |= uint64_t{byte & 0x7fu} << (7 * i);
      if (byte < 0x80) return true;
    }
    return false;
  }

  const uint8_t* at_;
  const uint8_t* end_;
};

// A tag that ends a message's field loop in protobuf's parser: 0 or an
// end-group. Outside the group it closes, that fails the parse.
inline bool EndsFields(uint32_t tag) { return tag == 0 || (tag & 7) == kWireEndGroup; }

// An unknown field (or a known number with an unexpected wire type), whose
// tag has been read: skipped, but it must be well formed.
inline bool SkipField(Reader& reader, uint32_t tag, int depth) {
  if ((tag >> 3) == 0) return false;
  switch (tag & 7) {
    case kWireVarint: {
      uint64_t ignored = 0;
      return reader.Varint(ignored);
    }
    case kWireFixed64: return reader.Skip(8);
    case kWireLengthDelimited: {
      std::span<const uint8_t> ignored;
      return reader.Payload(ignored);
    }
    case kWireFixed32: return reader.Skip(4);
    case kWireStartGroup: {
      if (--depth < 0) return false;
      while (true) {
        uint32_t inner = 0;
        if (reader.done() || !reader.Tag(inner)) return false;
        if (EndsFields(inner)) return inner == tag + 1;  // its own end-group only
        if (!SkipField(reader, inner, depth)) return false;
      }
    }
    default: return false;  // an end-group with no group open, or types 6 and 7
  }
}

// Runs `on_field(reader, tag)` for every field of one message; it returns
// false to fail the parse, or sets `known` false to have the field skipped.
template <typename OnField>
bool ParseFields(std::span<const uint8_t> bytes, int depth, OnField on_field) {
  Reader reader(bytes);
  while (!reader.done()) {
    uint32_t tag = 0;
    if (!reader.Tag(tag) || EndsFields(tag)) return false;
    bool known = true;
    if (!on_field(reader, tag, known)) return false;
    if (!known && !SkipField(reader, tag, depth)) return false;
  }
  return true;
}

// A submessage field's payload, parsed one level deeper.
template <typename ParseMessage>
bool ParseSubmessage(Reader& reader, int depth, ParseMessage parse) {
  std::span<const uint8_t> payload;
  if (!reader.Payload(payload)) return false;
  if (depth - 1 < 0) return false;
  return parse(payload, depth - 1);
}

// A proto3 string field, viewed where it lies; it must be UTF-8.
inline bool ViewString(Reader& reader, absl::string_view& out) {
  std::span<const uint8_t> payload;
  if (!reader.Payload(payload) || !IsValidUtf8(payload)) return false;
  out = absl::string_view(reinterpret_cast<const char*>(payload.data()), payload.size());
  return true;
}

// The same, copied into `out`.
inline bool ParseString(Reader& reader, std::string& out) {
  absl::string_view view;
  if (!ViewString(reader, view)) return false;
  out.assign(view.data(), view.size());
  return true;
}

// A bool field: any nonzero varint is true, as protobuf reads it.
inline bool ParseBool(Reader& reader, bool& out) {
  uint64_t value = 0;
  if (!reader.Varint(value)) return false;
  out = value != 0;
  return true;
}

// Always inlined: a message of small fields calls it for nearly every field,
// and as a call it was a twentieth of a local batch fetch's client work.
template <typename Int>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ParseVarintAs(Reader& reader, Int& out) {
  uint64_t value = 0;
  if (!reader.Varint(value)) return false;
  out = static_cast<Int>(value);  // truncated to the field's width, as protobuf does
  return true;
}

// A repeated integer field: packed (one payload of varints) or one element,
// appended to `out` (protobuf takes either form for any repeated scalar).
template <typename Int>
bool ParseRepeatedVarints(Reader& reader, uint32_t tag, std::vector<Int>& out) {
  if ((tag & 7) == kWireVarint) {
    Int value = 0;
    if (!ParseVarintAs(reader, value)) return false;
    out.push_back(value);
    return true;
  }
  std::span<const uint8_t> payload;
  if (!reader.Payload(payload)) return false;
  Reader packed(payload);
  while (!packed.done()) {
    Int value = 0;
    if (!ParseVarintAs(packed, value)) return false;
    out.push_back(value);
  }
  return true;
}

// A v1::ByteRange field (offset = 1, length = 2), merged into what an
// earlier occurrence set.
inline bool ParseByteRangeField(Reader& reader, int depth, uint64_t& offset, uint64_t& length) {
  return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
    return ParseFields(payload, inner, [&](Reader& range, uint32_t tag, bool& known) {
      switch (tag) {
        case Tag(1, kWireVarint): return ParseVarintAs(range, offset);
        case Tag(2, kWireVarint): return ParseVarintAs(range, length);
        default: known = false; return true;
      }
    });
  });
}

}  // namespace tensord::wire_reader

#endif  // TENSORD_SERVICE_WIRE_WIRE_READER_H_
