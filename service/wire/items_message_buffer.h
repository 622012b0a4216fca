// A batch stream's message of items, {outer field: {items...}}, written by
// hand into one gRPC slice: each item at its place as it comes, the outer
// tag and length put in front at the end (room for them is kept first), so
// the message is built without a protobuf message per item and its bytes
// are copied once. An item's bytes may instead be referenced where they
// lie (a slice of their own, released by gRPC when sent): the message is
// then the buffer's pieces with those slices between them. BatchFetch
// answers (server) and BatchPut requests (client) are written with it.
#ifndef TENSORD_SERVICE_WIRE_ITEMS_MESSAGE_BUFFER_H_
#define TENSORD_SERVICE_WIRE_ITEMS_MESSAGE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

namespace tensord {

// Not thread-safe; one per message.
class ItemsMessageBuffer {
 public:
  // The message's field `outer_field` (1..15) holds the items; room for
  // about `budget` bytes of them.
  ItemsMessageBuffer(uint32_t outer_field, size_t budget);

  size_t items() const { return items_; }

  // Where the next item's `size` bytes go, or nullptr when they do not fit
  // (the message is full): the first item always fits, however large.
  // `referenced` bytes more of the item will follow them by reference
  // (CommitReferencing); they count against the budget but take no room.
  uint8_t* Reserve(size_t size, size_t referenced = 0);
  // The item Reserve() made room for ends at `end`.
  void Commit(uint8_t* end);
  // The item Reserve() made room for goes on to `end`, then to the bytes
  // of `referenced` (as many as Reserve was told), which gRPC holds by
  // reference until it has sent them.
  void CommitReferencing(uint8_t* end, grpc::Slice referenced);

  // The message. Call once.
  grpc::ByteBuffer Finish();

 private:
  const uint32_t outer_field_;
  grpc::Slice slice_;
  uint8_t* base_ = nullptr;  // slice_'s first byte
  size_t capacity_ = 0;      // bytes after the framing room
  size_t used_ = 0;          // item bytes written after the framing room
  size_t items_ = 0;
  // The referenced slices, each after the buffer's first `at` item bytes.
  struct Reference {
    size_t at;
    grpc::Slice slice;
  };
  std::vector<Reference> references_;
  size_t referenced_bytes_ = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_ITEMS_MESSAGE_BUFFER_H_
