// The client's one routing rule: which transport serves a call (the local
// handoff or gRPC), or an error naming why neither can, and whether a local
// answer is retried over gRPC. Pure: no sockets, no channels; the
// TransportSelector applies it and call_routing_test tabulates it.
#ifndef TENSORD_CLIENT_SRC_CALL_ROUTING_H_
#define TENSORD_CLIENT_SRC_CALL_ROUTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/client.h"

namespace tensord {

enum class CallKind {
  kPut,         // Put
  kFetch,       // Fetch, FetchInto
  kBatchFetch,  // BatchFetch, BatchFetchPrefix, BatchFetchGroup
  kCreate,      // Create: the handoff socket's create/seal
  kSealGroup,   // SealGroup of local creates
  kBatchPut,    // BatchPut: the handoff's put_many, gRPC where only it serves
  kGrpcOnly,    // Stat, List, Watch, Delete, FetchBytes, Snapshot, ...
};

struct RoutedCall {
  CallKind kind = CallKind::kGrpcOnly;
  // For kPut: the put goes into device memory (PutOptions::device), or asks
  // for copies on other nodes (PutOptions::replicas > 1). Both are made by
  // the server after a gRPC put.
  bool device_put = false;
  uint32_t replicas = 1;
  // Names the call in errors: "put of 'x'", "put of 'x' into device memory
  // (device type 2, id 0)".
  std::string what;
};

enum class Transport { kLocal, kRemote };

// The transport for `call` under `path`. `local()` is OK when this client
// has a local handoff connection, and otherwise says why not (under kLocal
// that reason is the answer); it is asked only when the rule needs it (a
// gRPC-only call never looks for the socket). kRemote and kAuto without a connection use gRPC;
// kLocal never does, except for calls only gRPC serves; a put into device
// memory or with replicas is gRPC's (FAILED_PRECONDITION under kLocal);
// SealGroup is local's (UNAVAILABLE without a connection).
absl::StatusOr<Transport> RouteCall(const RoutedCall& call, TransferPath path,
                                    absl::FunctionRef<absl::Status()> local);

// What follows a local answer.
enum class AfterLocal {
  kStands,              // it is the call's answer
  kRetryRemote,         // only gRPC can serve it (use_remote): ask gRPC
  kForgetLocalAndRetry  // the socket broke (UNAVAILABLE): drop it, ask gRPC
};

// Only kAuto retries, and never a Create or SealGroup (no gRPC path) nor
// an answer the server gave on the socket (MarkServerAnswer): gRPC would
// hear the same, or publish twice. A BatchPut that only gRPC can do
// (use_remote: nothing was published) goes over gRPC under kLocal too, as
// it did before the handoff had a batch put.
AfterLocal AfterLocalAnswer(CallKind kind, TransferPath path, const absl::Status& answer);

// The status a call's answer is routed by: its own, or for a batch fetch
// the first item only gRPC can serve (use_remote), so that kAuto fetches
// the whole batch over gRPC and the items stay one consistent cut.
template <typename T>
absl::Status RoutingStatus(const absl::StatusOr<T>& answer) {
  return answer.status();
}
absl::Status RoutingStatus(const absl::StatusOr<std::vector<absl::StatusOr<Tensor>>>& answer);

// A status the server answered on the handoff socket (as opposed to the
// socket failing); see AfterLocalAnswer.
absl::Status MarkServerAnswer(absl::Status status);
bool IsServerAnswer(const absl::Status& status);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_CALL_ROUTING_H_
