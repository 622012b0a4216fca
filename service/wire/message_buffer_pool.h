// Buffers for the batch streams' hand-written messages (ItemsMessageBuffer),
// kept for reuse once gRPC lets go of them. A fresh 1 MiB malloc per
// message was a mapping of its own (glibc's mmap threshold stays at its
// 128 KiB start once TuneMallocForTransfers sets the trim threshold), so
// every message faulted its pages in one by one and unmapped them after:
// 45% of the client's CPU in a remote BatchPut of 1024 x 4 KiB (perf).
#ifndef TENSORD_SERVICE_WIRE_MESSAGE_BUFFER_POOL_H_
#define TENSORD_SERVICE_WIRE_MESSAGE_BUFFER_POOL_H_

#include <cstddef>

#include <grpcpp/support/slice.h>

namespace tensord {

// Idle buffers kept per size, and idle bytes over all sizes, at most: a
// process keeps that much faulted in (a message's budget is 1 MiB by
// default; clients with other chunk sizes, or first items larger than the
// budget, make other sizes).
inline constexpr size_t kMaxIdleMessageBuffers = 8;
inline constexpr size_t kMaxIdleMessageBufferBytes = size_t{32} << 20;

// A slice of `size` writable bytes: an idle buffer of that size when one
// is kept, else new memory. The buffer comes back when gRPC (or the
// caller) drops the last reference to the slice, on whatever thread that
// is; beyond the bounds above it is freed. Thread-safe.
grpc::Slice TakeMessageBuffer(size_t size);

// Idle buffers of `size` kept now (for tests).
size_t IdleMessageBuffers(size_t size);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_MESSAGE_BUFFER_POOL_H_
