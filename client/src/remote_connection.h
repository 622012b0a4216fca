// One gRPC connection to a tensord server and its calls, each exactly one
// RPC: a unary call with this client's metadata and deadline, one Fetch
// stream into a FetchStreamReceiver, one FetchInline call, one Put or
// PutPart stream, and the channels extra parts travel on. It decides
// nothing about how a transfer is split (transfer_plan.cc does) and builds
// no request (remote_transport.cc does).
#ifndef TENSORD_CLIENT_SRC_REMOTE_CONNECTION_H_
#define TENSORD_CLIENT_SRC_REMOTE_CONNECTION_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/src/call_cancellation.h"
#include "client/src/fetch_stream_receiver.h"
#include "client/src/slice_latch.h"
#include "client/src/transfer_streams.h"
#include "service/common/mutex.h"
#include "service/wire/status_conversion.h"
#include "tensord/client.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord {

// gRPC names its generated client class "Stub".
using TensorServiceClient = v1::TensorService::Stub;

// What one Fetch stream (or FetchInline call) delivered.
struct StreamedRange {
  TensorInfo info;
  bool split = false;  // the server asked for the range in parts; no bytes came
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t crc32c = 0;  // of the received bytes, with verify_crc32c
};

class RemoteConnection;

// One call's gRPC context: this client's metadata, the call's deadline, and
// a hook that cancels it when the call's CallCancellation is cancelled
// (gone with it: the hook goes first).
class CallContext {
 public:
  CallContext(const RemoteConnection& connection, const CallOptions& call,
              bool with_deadline = true);
  grpc::ClientContext& get() { return context_; }

 private:
  grpc::ClientContext context_;
  CancellationHook hook_;
};

// The Fetch request of `name` at options.version (0: the latest).
v1::FetchRequest FetchRequestFor(absl::string_view name, const FetchOptions& options);

// Thread-safe.
class RemoteConnection {
 public:
  // Checks `options` (INVALID_ARGUMENT naming the bad value) and creates the
  // channel; does not wait for the server.
  static absl::StatusOr<std::unique_ptr<RemoteConnection>> Open(const ClientOptions& options);
  RemoteConnection(const RemoteConnection&) = delete;
  RemoteConnection& operator=(const RemoteConnection&) = delete;

  // This client's bearer token, the call's request id (or the client's)
  // and, unless `with_deadline` is false (a call that lasts as long as its
  // caller wants: Watch), the call's deadline (or the client's).
  void PrepareContext(grpc::ClientContext& context, const CallOptions& call,
                      bool with_deadline = true) const;

  // One unary call on `on` with this client's metadata, the call's deadline
  // and cancellation. `Service` is a generated gRPC client class
  // (TensorService's, Health's).
  template <typename Service, typename Request, typename Response>
  absl::Status Unary(Service& on,
                     grpc::Status (Service::*method)(grpc::ClientContext*, const Request&,
                                                     Response*),
                     const Request& request, Response& response, const CallOptions& call) const;

  // One TensorService unary call, e.g. Call(&TensorServiceClient::Stat, ...).
  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (TensorServiceClient::*method)(grpc::ClientContext*,
                                                                const Request&, Response*),
                    const Request& request, Response& response, const CallOptions& call) const {
    return Unary(*tensor_service, method, request, response, call);
  }

  // One Fetch stream on `on`: `request`'s bytes to where `destination_for`
  // says, or a split header.
  absl::StatusOr<StreamedRange> StreamFetch(grpc::Channel& on, grpc::ClientContext& context,
                                            const v1::FetchRequest& request,
                                            const FetchOptions& fetch_options,
                                            FetchStreamReceiver::DestinationFor destination_for);

  // The FetchInline call: the bytes, or a split header when the range is
  // too large to travel inline.
  absl::StatusOr<StreamedRange> FetchInline(absl::string_view name,
                                            const FetchOptions& fetch_options,
                                            const CallOptions& call,
                                            FetchStreamReceiver::DestinationFor destination_for);

  // One Put (or PutPart) stream on `on`: `header`, then `part` of `data`
  // in chunks pointing at the caller's memory, counted in `latch`.
  // `progress` gets the part's bytes sent so far. gRPC gives back the
  // chunks of a call that ended early (deadline, cancel, error) only when
  // its `context` is destroyed: destroy it, then wait on `latch`, before
  // the caller's memory may go.
  absl::StatusOr<v1::PutResponse> StreamPut(grpc::Channel& on,
                                            const grpc::internal::RpcMethod& method,
                                            grpc::ClientContext& context,
                                            const v1::PutRequest& header, const uint8_t* data,
                                            TransferPart part, const ProgressCallback& progress,
                                            SliceLatch& latch);

  // The channel of the part at `index`: the connection's own for 0, else
  // one of its own TCP connection, made on first use and kept.
  grpc::Channel& PartChannel(size_t index);

  // A context per part, each as CallContext makes it.
  std::vector<std::unique_ptr<CallContext>> PartContexts(size_t parts,
                                                         const CallOptions& call) const;

  const ClientOptions options;
  const std::shared_ptr<grpc::ChannelCredentials> credentials;
  const grpc::ChannelArguments arguments;
  const std::shared_ptr<grpc::Channel> channel;
  // gRPC's generated client class for TensorService's unary calls.
  const std::unique_ptr<TensorServiceClient> tensor_service;
  // Put and Fetch are raw ByteBuffer calls (zero-copy chunks both ways).
  const grpc::internal::RpcMethod put_method;
  const grpc::internal::RpcMethod put_part_method;
  const grpc::internal::RpcMethod fetch_method;
  const grpc::internal::RpcMethod fetch_inline_method;
  // Raw: the answer is parsed by hand (service/wire/wire_tensor_info.h).
  const grpc::internal::RpcMethod stat_method;
  const grpc::internal::RpcMethod batch_put_method;
  const grpc::internal::RpcMethod batch_fetch_method;
  const grpc::internal::RpcMethod watch_method;

 private:
  RemoteConnection(const ClientOptions& options, std::shared_ptr<grpc::Channel> channel,
                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                   grpc::ChannelArguments arguments);

  Mutex part_channels_mutex_;
  // [i - 1] for part i.
  std::vector<std::shared_ptr<grpc::Channel>> part_channels_ ABSL_GUARDED_BY(part_channels_mutex_);
};

template <typename Service, typename Request, typename Response>
absl::Status RemoteConnection::Unary(
    Service& on, grpc::Status (Service::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request, Response& response, const CallOptions& call) const {
  CallContext context(*this, call);
  return FromGrpcStatus((on.*method)(&context.get(), request, &response));
}

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_REMOTE_CONNECTION_H_
