// Requests that name tensors by the thousand, framed by hand: the handoff's
// batch acquire and batch put (HandoffRequest's acquire_many and put_many
// fields), the BatchFetch request and the BatchPut item headers. Building
// them with protobuf made a message and a string per name only to
// serialize them: an eighth of the client's work in a local batch fetch of
// small tensors, three allocations a name in a remote one, a third of a
// local batch put's (its items' messages built, copied into the request
// and destroyed) and a fifth of a remote one's. The bytes are those the
// generated serializer writes (BatchRequestWireTest).
#ifndef TENSORD_CLIENT_SRC_BATCH_REQUEST_WIRE_H_
#define TENSORD_CLIENT_SRC_BATCH_REQUEST_WIRE_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/strings/string_view.h"
#include "service/dlpack/tensor_layout.h"

#include "client/src/client_transport.h"
#include "tensord/client.h"

namespace tensord {

// AcquireManyRequest's fields for a request by name.
struct AcquireManyByName {
  std::span<const TensorRef> items;
  bool host_only = false;
  bool accepts_arena_slots = false;
  std::span<const uint64_t> mapped_arena_ids;
};

// The bytes one item adds to a request's repeated items field (acquire_many's
// or BatchFetchRequest's).
size_t NameVersionItemSize(const TensorRef& item);
// Appends the acquire_many field (tag, length, payload) to `out`.
void AppendAcquireManyField(const AcquireManyByName& request, std::string& out);

// One v1::PutManyItem: a tensor whose bytes lie at `offset` of the
// request's memfd.
struct PutManyItemWire {
  absl::string_view name;
  const dlpack::TensorLayout* layout = nullptr;
  uint64_t total_bytes = 0;
  int32_t retention = 0;  // a v1::Retention
  std::optional<uint32_t> crc32c;
  uint64_t offset = 0;
};

// The bytes one item adds to put_many's repeated items field.
size_t PutManyItemSize(const PutManyItemWire& item);
// Appends the put_many field (tag, length, payload) to `out`.
void AppendPutManyField(std::span<const PutManyItemWire> items, bool atomic, std::string& out);

// A v1::PutHeader as a BatchPut item carries it: a compact host tensor,
// its layout written without strides.
struct PutHeaderWire {
  absl::string_view name;
  const dlpack::TensorLayout* layout = nullptr;  // its strides are not written
  uint64_t total_bytes = 0;
  std::optional<uint32_t> crc32c;
  int32_t retention = 0;  // a v1::Retention
};

// The header's serialized size (its payload, without a tag or length).
size_t PutHeaderSize(const PutHeaderWire& header);
// Writes the header's `size` (PutHeaderSize) bytes at `out`; returns
// their end.
uint8_t* PutPutHeader(const PutHeaderWire& header, size_t size, uint8_t* out);
// A v1::BatchPutRequest holding only `header`, in one slice: the message
// that precedes the chunks of an item sent in chunks.
grpc::ByteBuffer EncodeBatchPutHeaderRequest(const PutHeaderWire& header);

// A v1::BatchFetchRequest choosing `selection`, in one slice.
grpc::ByteBuffer EncodeBatchFetchRequest(const BatchSelection& selection);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_BATCH_REQUEST_WIRE_H_
