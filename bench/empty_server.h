// The empty-call baseline: a callback-API gRPC server, in a process of its
// own, whose unary method answers at once with an empty message. It reuses
// tensord's generated service so the call path (generated stub, callback
// unary method, DefaultReactor) matches what Stat takes, minus the work.
#ifndef TENSORD_BENCH_EMPTY_SERVER_H_
#define TENSORD_BENCH_EMPTY_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bench/measure.h"

namespace tensord::bench {

// The hidden `--serve-empty=ADDR --ready-file=PATH` mode of tensord-bench:
// serves until SIGTERM/SIGINT, writing the bound address to `ready_file`
// once serving. Returns the process exit code. With `close_idle_connections`
// (`--serve-empty-closing-idle`), the server sets gRPC's max connection idle
// time as tensord does by default (--connection-idle-timeout): the empty
// call then pays only for the filter that closing costs on every call.
int ServeEmpty(const std::string& address, const std::string& ready_file,
               bool close_idle_connections);

// An operation that makes one empty unary call (an empty StatRequest
// answered by an empty StatResponse) on a channel of its own.
absl::StatusOr<Operation> MakeEmptyCall(const std::string& target);

// The same empty call made as tensord's client makes its Stat and small
// fetches: on a channel with the client's default arguments (gRPC's retries
// off, its own idle close) and through its thread's reused completion
// queue, the request a NameVersionRequest. What the gRPC part of those
// calls costs, tensord's own work aside.
absl::StatusOr<Operation> MakeClientPathEmptyCall(const std::string& target);

// What the empty server's payload call answers.
inline constexpr size_t kPayloadBytes = 4096;

// An operation that makes one unary call answered by kPayloadBytes (raw
// FetchInline to the empty server, nothing parsed on either side): what
// moving a 4 KiB fetch's bytes through gRPC costs, without tensord.
absl::StatusOr<Operation> MakePayloadCall(const std::string& target);

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_EMPTY_SERVER_H_
