// The client's one transport interface: how a call that both paths serve
// moves tensor bytes. RemoteTransport streams them over gRPC; LocalTransport
// hands them over the server's handoff socket (memfds, device handles).
// TransportSelector picks one per call and owns the fallback rule, so a new
// data call (batch, watch, cluster routing) is one method here and one in
// each transport, not a branch in every public method of Client.
#ifndef TENSORD_CLIENT_SRC_CLIENT_TRANSPORT_H_
#define TENSORD_CLIENT_SRC_CLIENT_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/client.h"
#include "tensord/tensor.h"

namespace tensord {

// What one batch fetch chooses: exactly one of the three.
struct BatchSelection {
  std::span<const TensorRef> items;  // at most kMaxBatchItems
  std::optional<std::string> prefix;
  uint64_t group_version = 0;
  uint64_t cluster_group = 0;  // remote only
};

// Implementations are thread-safe. Arguments have been validated by Client
// (tensor name, host tensor layout, CallOptions) before a transport sees
// them; `call` carries the call's deadline, request id and cancellation.
//
// A transport that cannot serve a call on its path answers with a status
// marked use_remote (MarkUseRemote) when gRPC can serve it instead, or
// UNAVAILABLE when its path is broken; TransportSelector decides from that
// (except for Create, whose local answer always stands).
class ClientTransport {
 public:
  virtual ~ClientTransport() = default;

  // A new version of `name` from the caller's host tensor (options.device:
  // where the server stores it).
  virtual absl::StatusOr<TensorInfo> Put(absl::string_view name, const DLTensor& tensor,
                                         const PutOptions& options, const CallOptions& call) = 0;

  // The whole tensor, in memory the returned Tensor owns or maps.
  virtual absl::StatusOr<Tensor> Fetch(absl::string_view name, const FetchOptions& options,
                                       const CallOptions& call) = 0;

  // The tensor copied into the caller's host memory (`destination`: any
  // strides; dtype and shape must match).
  virtual absl::StatusOr<TensorInfo> FetchInto(absl::string_view name, const DLTensor& destination,
                                               const FetchOptions& options,
                                               const CallOptions& call) = 0;

  // Many tensors leased at one moment: one result per item (in request
  // order, or name order for a prefix or group), each failing on its own;
  // an item only gRPC can serve fails with use_remote.
  virtual absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> BatchFetch(
      const BatchSelection& selection, const FetchOptions& options, const CallOptions& call) = 0;
  // Many host tensors published (at most kMaxBatchItems): one result per
  // item, in order; an atomic batch under one version, or none of it.
  // The local handoff refuses with use_remote what only gRPC does (a
  // cluster's puts, an atomic batch beyond one handoff request).
  virtual absl::StatusOr<BatchPutResult> BatchPut(std::span<const BatchPutItem> items,
                                                  const BatchPutOptions& options,
                                                  const CallOptions& call) = 0;
  // A buffer in the server's memory for a new version, filled in place.
  virtual absl::StatusOr<std::unique_ptr<TensorWriter>> Create(absl::string_view name,
                                                               DLDataType dtype,
                                                               std::span<const int64_t> shape,
                                                               const CreateOptions& options,
                                                               const CallOptions& call) = 0;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_CLIENT_TRANSPORT_H_
