// Decodes the messages of tensord's streams (PutRequest and FetchResponse:
// field 1 a header message, field 2 a Chunk{offset, data}) straight from the
// received pieces, without copying chunk data. The encoding side writes the
// chunk framing by hand so tensor bytes can follow as their own slice.
// Parses untrusted input: every length is checked against what is there.
#ifndef TENSORD_SERVICE_WIRE_STREAM_MESSAGE_H_
#define TENSORD_SERVICE_WIRE_STREAM_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tensord {

// Largest serialized header accepted (a header is a name and a layout).
inline constexpr size_t kMaxStreamHeaderBytes = 64 * 1024;

// Bytes EncodeChunkPrefix may write.
inline constexpr size_t kMaxChunkPrefixBytes = 40;

// Writes the protobuf framing of field 2 (Chunk{offset, data}) up to and
// including data's length, so that `data_size` bytes of data complete the
// message. Returns the bytes written to `out`.
size_t EncodeChunkPrefix(uint64_t offset, uint64_t data_size, uint8_t* out);

// One decoded stream message. Reused across messages so the hot path does not
// allocate: Decode() clears it first.
struct StreamMessage {
  enum class Kind { kEmpty, kHeader, kChunk };
  Kind kind = Kind::kEmpty;
  // Serialized header message (field 1), for the typed protobuf parser.
  std::string header;
  uint64_t chunk_offset = 0;
  uint64_t chunk_size = 0;
  // The chunk's data, in order, pointing into the decoded pieces.
  std::vector<std::span<const uint8_t>> chunk_pieces;
};

// Decodes the message whose bytes are the concatenation of `pieces`.
// Unknown fields are skipped as protobuf requires; INVALID_ARGUMENT for
// truncated or malformed wire data, a message carrying both a header and a
// chunk, a repeated chunk data field, or a header over kMaxStreamHeaderBytes.
absl::Status DecodeStreamMessage(std::span<const std::span<const uint8_t>> pieces,
                                 StreamMessage& message);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_STREAM_MESSAGE_H_
