// grpc::ByteBuffer <-> tensord stream messages and protobuf messages, with
// tensor bytes sent and received as slices rather than copied into protobuf.
#ifndef TENSORD_SERVICE_WIRE_BYTE_BUFFER_CODEC_H_
#define TENSORD_SERVICE_WIRE_BYTE_BUFFER_CODEC_H_

#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "service/wire/stream_message.h"

namespace tensord {

// Decodes received stream messages; reuse one per stream so steady-state
// decoding allocates nothing of its own.
class ByteBufferDecoder {
 public:
  // The returned message's chunk and inline-data pieces stay valid until
  // the next Decode().
  absl::Status Decode(const grpc::ByteBuffer& buffer,
                      HeaderInlineData inline_data = HeaderInlineData::kKeep);
  const StreamMessage& message() const { return message_; }
  // The last decoded message's bytes, valid until the next Decode(): for
  // a message of another kind than StreamMessage's (BatchFetch's items).
  std::span<const std::span<const uint8_t>> pieces() const {
    if (pieces_.empty()) return {&single_piece_, 1};
    return pieces_;
  }

 private:
  grpc::Slice single_slice_;
  std::span<const uint8_t> single_piece_;
  std::vector<grpc::Slice> slices_;
  std::vector<std::span<const uint8_t>> pieces_;
  StreamMessage message_;
};

// A stream message whose chunk carries `size` bytes at `data` without copying
// them: gRPC calls `release(user_data)` once it no longer needs the bytes,
// possibly on another thread and after the write completed. `size` > 0.
grpc::ByteBuffer MakeChunkBuffer(uint64_t offset, const void* data, size_t size,
                                 void (*release)(void*), void* user_data);

// The same message with the bytes copied into a slice of its own: for bytes
// (pinned staging of a device tensor) that are reused as soon as this returns.
grpc::ByteBuffer MakeCopiedChunkBuffer(uint64_t offset, std::span<const uint8_t> data);

grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& message);

// A v1::StatRequest, and equally a v1::FetchRequest naming no range, chunk
// size or split (FetchInline's), written by hand: byte for byte what the
// generated serializer writes (byte_buffer_codec_test). The message, its
// arena and its serializer were a tenth of what tensord added to a Stat on
// the client.
grpc::ByteBuffer EncodeNameVersionRequest(absl::string_view name, uint64_t version);

// The same request as a message type of its own, which gRPC serializes
// with the SerializationTraits after this namespace: the encoded buffer is
// swapped into the call's send buffer, where a grpc::ByteBuffer handed to a
// call is copied (gRPC's traits for ByteBuffer; 430 instructions per Stat
// and small fetch). `name` must outlive the call.
struct NameVersionRequest {
  absl::string_view name;
  uint64_t version = 0;
};

// A FetchResponse whose header is `header` (a FetchHeader without
// inline_data) carrying `inline_data` as FetchHeader.inline_data, the bytes
// in their own slice: protobuf would copy them twice more.
grpc::ByteBuffer MakeInlineHeaderBuffer(const google::protobuf::MessageLite& header,
                                        grpc::Slice inline_data);
// The same for a header written by hand: `write_header` writes its
// `header_size` bytes at the pointer it is given.
grpc::ByteBuffer MakeInlineHeaderBuffer(size_t header_size,
                                        absl::FunctionRef<void(uint8_t*)> write_header,
                                        grpc::Slice inline_data);
// A FetchResponse whose header (no inline data) `write_header` writes.
grpc::ByteBuffer MakeHeaderBuffer(size_t header_size,
                                  absl::FunctionRef<void(uint8_t*)> write_header);

// INVALID_ARGUMENT naming `what` when the bytes are not a valid message.
// `buffer`'s bytes as one slice: its own when it has one, else a copy.
// INVALID_ARGUMENT naming `what` when it cannot be read (compressed wrongly).
absl::Status FlattenByteBuffer(const grpc::ByteBuffer& buffer, grpc::Slice& slice,
                               absl::string_view what);

absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                                 google::protobuf::MessageLite& message, absl::string_view what);

}  // namespace tensord

template <>
class grpc::SerializationTraits<tensord::NameVersionRequest> {
 public:
  static grpc::Status Serialize(const tensord::NameVersionRequest& request,
                                grpc::ByteBuffer* buffer, bool* own_buffer) {
    grpc::ByteBuffer encoded = tensord::EncodeNameVersionRequest(request.name, request.version);
    buffer->Swap(&encoded);
    *own_buffer = true;
    return grpc::Status::OK;
  }
  // Only sent: nothing of tensord's receives one.
  static grpc::Status Deserialize(grpc::ByteBuffer*, tensord::NameVersionRequest*) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "a NameVersionRequest is only sent");
  }
};

#endif  // TENSORD_SERVICE_WIRE_BYTE_BUFFER_CODEC_H_
