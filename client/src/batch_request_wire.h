// Requests that name tensors by the thousand, framed by hand: the handoff's
// batch acquire (HandoffRequest's acquire_many field) and the BatchFetch
// request. Building them with protobuf made a NameVersion message and a
// string per name only to serialize them: an eighth of the client's work in
// a local batch of small tensors, and three allocations a name in a remote
// one. The bytes are those the generated serializer writes
// (BatchRequestWireTest).
#ifndef TENSORD_CLIENT_SRC_BATCH_REQUEST_WIRE_H_
#define TENSORD_CLIENT_SRC_BATCH_REQUEST_WIRE_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

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

// A v1::BatchFetchRequest choosing `selection`, in one slice.
grpc::ByteBuffer EncodeBatchFetchRequest(const BatchSelection& selection);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_BATCH_REQUEST_WIRE_H_
