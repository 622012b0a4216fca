// Request and response messages of a callback unary method in one protobuf
// arena per call, whose first block comes with the call's holder: the
// strings, repeated fields and submessages a handler fills (a List page's
// TensorInfos have six each) then cost no malloc and free each.
#ifndef TENSORD_SERVICE_TRANSPORT_ARENA_MESSAGE_ALLOCATOR_H_
#define TENSORD_SERVICE_TRANSPORT_ARENA_MESSAGE_ALLOCATOR_H_

#include <grpcpp/support/message_allocator.h>

#include "service/wire/call_arena.h"

namespace tensord {

// Thread-safe (stateless); must outlive the server that uses it.
template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() {
      this->set_request(arena_.template Make<Request>());
      this->set_response(arena_.template Make<Response>());
    }
    void Release() override { delete this; }

   private:
    // Small enough that the holder stays in malloc's per-thread cache
    // (blocks up to 1 KiB); a large answer (a List page) spills to the heap.
    BasicCallArena<768> arena_;
  };
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_ARENA_MESSAGE_ALLOCATOR_H_
