// A BatchFetchResponse carrying items (BatchFetchItems), written by hand
// into one slice: the bytes the generated serializer gives for the same
// items (batch_fetch_items_wire_test holds them byte-equal), without a
// v1::BatchFetchItem, a TensorInfo message and a std::string of the bytes
// per item, which cost two copies of every byte and a third of the
// server's CPU in a BatchFetch of 1024 x 4 KiB (perf).
#ifndef TENSORD_SERVICE_TRANSPORT_BATCH_FETCH_ITEMS_WIRE_H_
#define TENSORD_SERVICE_TRANSPORT_BATCH_FETCH_ITEMS_WIRE_H_

#include <cstddef>
#include <cstdint>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/registry/tensor_version.h"
#include "service/wire/items_message_buffer.h"

namespace tensord {

// Longest ItemStatus message an item carries; a longer one is cut at a
// UTF-8 character boundary (protobuf's parser refuses a string that is not
// UTF-8).
inline constexpr size_t kMaxItemStatusMessageBytes = 300;

// Not thread-safe; one per message.
class BatchFetchItemsWire {
 public:
  // Room for about `budget` bytes of items; the first item always fits.
  explicit BatchFetchItemsWire(size_t budget);

  size_t items() const { return buffer_.items(); }

  // Appends an item that failed with `status` (not OK).
  // Whether it fitted (the message then holds it).
  bool AddFailure(uint32_t index, const absl::Status& status);

  // Appends the item of `version`: its info, and with `inline_size`
  // (`version.total_bytes`, or nothing for an item whose chunks follow the
  // message) its bytes, which `copy_bytes` writes at the pointer it is
  // given. Whether it fitted; a failed copy fails the message.
  absl::StatusOr<bool> AddVersion(uint32_t index, const TensorVersion& version, bool with_bytes,
                                  absl::FunctionRef<absl::Status(uint8_t*)> copy_bytes);

  // Appends the item of `version` with its bytes, not copied: `reference`
  // (called only when the item fits) gives a slice of them that gRPC holds
  // until it has sent them. Whether it fitted.
  bool AddVersionReferencing(uint32_t index, const TensorVersion& version,
                             absl::FunctionRef<grpc::Slice()> reference);

  // The message: BatchFetchResponse{items: {items...}}. Call once.
  grpc::ByteBuffer Finish();

 private:
  ItemsMessageBuffer buffer_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_BATCH_FETCH_ITEMS_WIRE_H_
