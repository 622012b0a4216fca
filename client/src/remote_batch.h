// The client's side of the BatchPut and BatchFetch streams: items packed
// many to a message (small) or as a header and zero-copy chunks (large),
// and the answer turned into per-item results. Included only by
// remote_transport.cc, which owns the channel and the call's context.
#ifndef TENSORD_CLIENT_SRC_REMOTE_BATCH_H_
#define TENSORD_CLIENT_SRC_REMOTE_BATCH_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "client/src/client_transport.h"
#include "client/src/receive_buffer_pool.h"
#include "client/src/remote_connection.h"
#include "tensord/client.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {

// One BatchPut call of at most kMaxBatchItems items, whose names and
// tensors Client has validated. `context` is prepared (deadline, token);
// it is destroyed before the call returns, since gRPC gives back the chunks
// of a call that ended early (they point into the items' memory) only then.
absl::StatusOr<BatchPutResult> StreamBatchPut(grpc::ChannelInterface* channel,
                                              const grpc::internal::RpcMethod& method,
                                              std::unique_ptr<CallContext> context,
                                              std::span<const BatchPutItem> items,
                                              const BatchPutOptions& options, uint32_t chunk_bytes);

// One BatchFetch call: the items in the server's order (request order, or
// name order for a prefix or group), each a host copy or its failure;
// items of 256 KiB or more receive into `receive_pool`'s buffers.
absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> StreamBatchFetch(
    grpc::ChannelInterface* channel, const grpc::internal::RpcMethod& method,
    grpc::ClientContext& context, const BatchSelection& selection, const FetchOptions& options,
    ReceiveBufferPool& receive_pool);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_REMOTE_BATCH_H_
