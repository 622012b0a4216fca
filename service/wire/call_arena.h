// A protobuf arena for the messages of one call, whose first block lives
// inside the object: the strings, repeated fields and submessages of a
// List or Delete call's messages (transport/arena_message_allocator.h)
// cost no malloc and free each.
#ifndef TENSORD_SERVICE_WIRE_CALL_ARENA_H_
#define TENSORD_SERVICE_WIRE_CALL_ARENA_H_

#include <google/protobuf/arena.h>

#include <cstddef>
#include <cstdint>

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

// An arena for the messages parsed from one request of many names (a
// handoff request: a batch acquire, a put_many): a thousand names are a few
// blocks, not two thousand allocations and frees.
inline google::protobuf::ArenaOptions ManyNamesArenaOptions() {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 4096;
  options.max_block_size = 64 * 1024;
  return options;
}

// Messages made one at a time, each used only until the next is made (the
// client's batch put item headers): made in an arena emptied
// every kPerRound of them, since a message on the heap, cleared for reuse,
// frees and allocates its submessages each time. Not thread-safe.
template <typename Message, uint32_t kPerRound = 256>
class ShortLivedMessages {
 public:
  // Ends the life of the message the previous call returned.
  Message& Next() {
    if (++made_ > kPerRound) {
      arena_.Reset();
      made_ = 1;
    }
    return *google::protobuf::Arena::CreateMessage<Message>(&arena_);
  }

 private:
  google::protobuf::Arena arena_{ManyNamesArenaOptions()};
  uint32_t made_ = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_CALL_ARENA_H_
