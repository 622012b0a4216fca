// A protobuf arena for the messages of one small call, whose first block
// lives inside the object (on the stack): a Stat answer or a fetch header is
// parsed and freed without malloc. Each string, repeated field and
// submessage of such a message was its own allocation and free.
#ifndef TENSORD_SERVICE_WIRE_CALL_ARENA_H_
#define TENSORD_SERVICE_WIRE_CALL_ARENA_H_

#include <google/protobuf/arena.h>

#include <cstddef>

namespace tensord {

// Not thread-safe; not movable (messages point into it). Messages made here
// live until it goes; more than kInlineBytes spills to the heap.
template <size_t kInlineBytes>
class BasicCallArena {
 public:
  BasicCallArena() : arena_(Options(block_)) {}
  BasicCallArena(const BasicCallArena&) = delete;
  BasicCallArena& operator=(const BasicCallArena&) = delete;

  template <typename Message>
  Message* Make() {
    return google::protobuf::Arena::CreateMessage<Message>(&arena_);
  }

 private:
  static google::protobuf::ArenaOptions Options(char* block) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = kInlineBytes;
    return options;
  }

  alignas(std::max_align_t) char block_[kInlineBytes];
  google::protobuf::Arena arena_;
};

// On the stack, for one call's messages.
using CallArena = BasicCallArena<2048>;

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_CALL_ARENA_H_
