// Protobuf's base-128 varint and proto3 field writers, for the messages
// tensord writes by hand (stream framing, Stat and fetch requests, the Stat
// and fetch-header answers).
#ifndef TENSORD_SERVICE_WIRE_VARINT_H_
#define TENSORD_SERVICE_WIRE_VARINT_H_

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace tensord {

inline constexpr uint32_t kWireVarint = 0;
inline constexpr uint32_t kWireFixed64 = 1;
inline constexpr uint32_t kWireLengthDelimited = 2;
inline constexpr uint32_t kWireFixed32 = 5;

// Protobuf reads a length (of a string, bytes or submessage field) in at
// most 5 bytes and refuses one above 2 GiB less its slop (its ReadSize);
// the hand parsers refuse what it refuses.
inline constexpr int kMaxLengthVarintBytes = 5;
inline constexpr uint64_t kMaxLength = INT_MAX - 16;

// Writes `value` at `out` (at most 10 bytes); returns the bytes written.
inline size_t PutVarint(uint64_t value, uint8_t* out) {
  size_t n = 0;
  while (value >= 0x80) {
    out[n++] = static_cast<uint8_t>(value) | 0x80;
    value >>= 7;
  }
  out[n++] = static_cast<uint8_t>(value);
  return n;
}

inline size_t VarintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

// The one-byte tag of fields 1..15.
constexpr uint8_t WireTag(uint32_t field, uint32_t wire_type) {
  return static_cast<uint8_t>((field << 3) | wire_type);
}

// proto3 leaves zero scalars and empty strings and repeated fields out; a
// set submessage is written even when empty. Sizes of whole fields (tag
// included) for fields 1..15:
inline size_t ScalarFieldSize(uint64_t bits) { return bits == 0 ? 0 : 1 + VarintSize(bits); }
inline size_t LengthDelimitedFieldSize(size_t payload) { return 1 + VarintSize(payload) + payload; }

// Writers returning the end of what they wrote.
inline uint8_t* PutScalarField(uint32_t field, uint64_t bits, uint8_t* out) {
  if (bits == 0) return out;
  *out++ = WireTag(field, kWireVarint);
  return out + PutVarint(bits, out);
}
// The tag and length; the caller writes the payload after them.
inline uint8_t* PutLengthPrefix(uint32_t field, size_t payload, uint8_t* out) {
  *out++ = WireTag(field, kWireLengthDelimited);
  return out + PutVarint(payload, out);
}
// A proto3 string or bytes field (left out when empty).
inline uint8_t* PutBytesField(uint32_t field, absl::string_view bytes, uint8_t* out) {
  if (bytes.empty()) return out;
  out = PutLengthPrefix(field, bytes.size(), out);
  std::memcpy(out, bytes.data(), bytes.size());
  return out + bytes.size();
}

// Protobuf writes a negative int32 (and enum) sign-extended to 64 bits.
inline uint64_t Int32Bits(int32_t value) {
  return static_cast<uint64_t>(static_cast<int64_t>(value));
}

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_VARINT_H_
