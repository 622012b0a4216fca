// The gRPC face of the registry: tensord.v1.TensorService on the callback
// API. Put, Fetch and the batch calls use raw ByteBuffers so large tensor
// bytes are never copied into or out of protobuf `bytes` fields.
#ifndef TENSORD_SERVICE_TRANSPORT_TENSOR_SERVICE_H_
#define TENSORD_SERVICE_TRANSPORT_TENSOR_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "service/common/idle_heap_trim.h"
#include "service/metrics/service_metrics.h"
#include "service/registry/registry.h"
#include "service/security/active_streams.h"
#include "service/security/token_authenticator.h"
#include "service/transport/arena_message_allocator.h"
#include "service/transport/call_record.h"
#include "service/transport/call_threads.h"
#include "service/transport/handoff_tokens.h"
#include "service/transport/open_watches.h"
#include "service/transport/parted_puts.h"
#include "service/transport/server_options.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord {

using TensorServiceBase = v1::TensorService::WithRawCallbackMethod_Put<
    v1::TensorService::WithRawCallbackMethod_PutPart<v1::TensorService::WithRawCallbackMethod_Fetch<
        v1::TensorService::WithRawCallbackMethod_FetchInline<
            v1::TensorService::WithRawCallbackMethod_Stat<
                v1::TensorService::WithCallbackMethod_List<
                    v1::TensorService::WithCallbackMethod_Delete<
                        v1::TensorService::WithCallbackMethod_GetServerInfo<
                            v1::TensorService::WithCallbackMethod_IssueHandoffToken<
                                v1::TensorService::WithCallbackMethod_Snapshot<
                                    v1::TensorService::WithRawCallbackMethod_BatchPut<
                                        v1::TensorService::WithRawCallbackMethod_BatchFetch<
                                            v1::TensorService::WithCallbackMethod_Watch<
                                                v1::TensorService::WithCallbackMethod_Replicate<
                                                    v1::TensorService::
                                                        WithCallbackMethod_AnnounceCopies<
                                                            v1::TensorService::
                                                                WithCallbackMethod_LocateCopy<
                                                                    v1::TensorService::
                                                                        Service>>>>>>>>>>>>>>>>;

// Thread-safe; the registry and metrics must outlive the service. Every
// call gets a request id and is recorded in `metrics`.
class TensorService final : public TensorServiceBase {
 public:
  // `snapshots` is null when the server has no --snapshot-dir.
  TensorService(Registry& registry, HandoffTokens& tokens, const ServerOptions& options,
                ServiceMetrics& metrics, SnapshotStore* snapshots);

  grpc::ServerReadReactor<grpc::ByteBuffer>* Put(grpc::CallbackServerContext* context,
                                                 grpc::ByteBuffer* response) override;
  // put_reactor.cc: one part of a put in several streams.
  grpc::ServerReadReactor<grpc::ByteBuffer>* PutPart(grpc::CallbackServerContext* context,
                                                     grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Fetch(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request) override;
  // fetch_reactor.cc, beside the stream it answers for.
  grpc::ServerUnaryReactor* FetchInline(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // Raw: the answer is written straight from the stored version
  // (tensor_info_wire.h).
  grpc::ServerUnaryReactor* Stat(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListRequest* request,
                                 v1::ListResponse* response) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const v1::DeleteRequest* request,
                                   v1::DeleteResponse* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest* request,
                                          v1::GetServerInfoResponse* response) override;
  grpc::ServerUnaryReactor* IssueHandoffToken(grpc::CallbackServerContext* context,
                                              const v1::IssueHandoffTokenRequest* request,
                                              v1::IssueHandoffTokenResponse* response) override;
  // Writes the snapshot on the calling gRPC thread: it takes as long as
  // writing and fsyncing the durable bytes, and snapshots are rare.
  grpc::ServerUnaryReactor* Snapshot(grpc::CallbackServerContext* context,
                                     const v1::SnapshotRequest* request,
                                     v1::SnapshotResponse* response) override;

  // batch_put_reactor.cc and batch_fetch_reactor.cc.
  grpc::ServerReadReactor<grpc::ByteBuffer>* BatchPut(grpc::CallbackServerContext* context,
                                                      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* BatchFetch(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request) override;

  // Cluster only, between nodes (cluster_calls.cc): another node asks this
  // one to copy an ordered version, tells it where cache copies are, or
  // asks where one is.
  grpc::ServerUnaryReactor* Replicate(grpc::CallbackServerContext* context,
                                      const v1::ReplicateRequest* request,
                                      v1::ReplicateResponse* response) override;
  grpc::ServerUnaryReactor* AnnounceCopies(grpc::CallbackServerContext* context,
                                           const v1::AnnounceCopiesRequest* request,
                                           v1::AnnounceCopiesResponse* response) override;
  grpc::ServerUnaryReactor* LocateCopy(grpc::CallbackServerContext* context,
                                       const v1::LocateCopyRequest* request,
                                       v1::LocateCopyResponse* response) override;

  // watch_reactor.cc.
  grpc::ServerWriteReactor<v1::WatchResponse>* Watch(grpc::CallbackServerContext* context,
                                                     const v1::WatchRequest* request) override;
  // Ends every open watch (UNAVAILABLE) and refuses new ones: the first step
  // of a shutdown.
  void EndWatches();
  size_t open_watches() const { return watches_.count(); }

  // Fetch payloads whose bytes gRPC has not finished sending (slices not
  // yet released). Shutdown waits for 0 so a finished call's tail is on the
  // wire before the process exits.
  int64_t live_payloads() const { return live_payloads_.load(std::memory_order_acquire); }

  // Runs first in every RPC, before any byte moves: the caller's token grant
  // (nullptr when auth is off), UNAUTHENTICATED or PERMISSION_DENIED.
  // `name` (empty when not known yet) only goes into the error message.
  static HandoffScope HandoffScopeOf(const TokenGrant* grant);
  absl::StatusOr<const TokenGrant*> AdmitCall(grpc::CallbackServerContext* context,
                                              absl::string_view rpc,
                                              absl::string_view name = "") const;
  // PERMISSION_DENIED when `grant` may not touch `name`; OK when auth is off.
  static absl::Status CheckName(const TokenGrant* grant, absl::string_view rpc,
                                absl::string_view name);
  ActiveStreams& streams() { return streams_; }
  // Puts carried by several streams, while their parts arrive.
  PartedPuts& parted_puts() { return parted_puts_; }
  // Large puts hold an activity so the freed heap goes back once they stop.
  IdleHeapTrim& heap_trim() { return heap_trim_; }

 private:
  // List with cluster=true: the durable names of the cluster, from etcd.
  grpc::ServerUnaryReactor* ListCluster(grpc::CallbackServerContext* context,
                                        const std::string& prefix, const v1::ListRequest& request,
                                        v1::ListResponse* response, CallRecord& call);
  // A Stat that waits for the cluster's latest first.
  grpc::ServerUnaryReactor* StatLatestInCluster(grpc::CallbackServerContext* context,
                                                std::string name, grpc::ByteBuffer* response,
                                                CallRecord& call);

  Registry& registry_;
  HandoffTokens& tokens_;
  const ServerOptions options_;
  ServiceMetrics& metrics_;
  SnapshotStore* const snapshots_;
  std::atomic<int64_t> live_payloads_{0};
  // Null when auth is off.
  const std::unique_ptr<const TokenAuthenticator> authenticator_;
  ActiveStreams streams_;
  PartedPuts parted_puts_;
  IdleHeapTrim heap_trim_;
  OpenWatches watches_;
  // The messages of the frequent unary calls, each call's in an arena.
  ArenaMessageAllocator<v1::ListRequest, v1::ListResponse> list_messages_;
  ArenaMessageAllocator<v1::DeleteRequest, v1::DeleteResponse> delete_messages_;
  // Last: joined first on destruction, while everything its work uses lives.
  CallThreads snapshot_threads_{2};
};

// Fills a wire TensorInfo from the registry's copy.
void InfoToProto(const VersionInfo& info, v1::TensorInfo* proto);
// The same from the version itself, with no VersionInfo copied in between
// (Stat, fetch headers: once per small call).
void InfoToProto(const TensorVersion& version, v1::TensorInfo* proto);

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_TENSOR_SERVICE_H_
