#include "client/src/remote_transport.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/src/heap_tensor_memory.h"
#include "client/src/host_tensor_source.h"
#include "client/src/info_conversion.h"
#include "client/src/receive_buffer_pool.h"
#include "client/src/remote_batch.h"
#include "client/src/remote_connection.h"
#include "client/src/transfer_plan.h"
#include "client/src/unary_byte_call.h"
#include "client/src/watch_stream.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/strided_copy.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/status_conversion.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord {

// The connection and its calls (remote_connection), how a whole transfer
// uses them (transfer_plan), and fetched tensors' new buffers.
struct RemoteTransport::Rep {
  explicit Rep(std::unique_ptr<RemoteConnection> opened)
      : connection(std::move(opened)),
        plan(*connection),
        receive_pool(ReceiveBufferPool::Create(connection->options.receive_pool_bytes,
                                               connection->options.receive_pool_idle_release)) {}
  const std::unique_ptr<RemoteConnection> connection;
  TransferPlan plan;
  // Shared with the tensors they went to.
  const std::shared_ptr<ReceiveBufferPool> receive_pool;
};

RemoteTransport::RemoteTransport(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
RemoteTransport::~RemoteTransport() = default;

absl::StatusOr<std::shared_ptr<RemoteTransport>> RemoteTransport::Connect(
    const ClientOptions& options) {
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<RemoteConnection> connection,
                           RemoteConnection::Open(options));
  return std::shared_ptr<RemoteTransport>(
      new RemoteTransport(std::make_unique<Rep>(std::move(connection))));
}

absl::StatusOr<TensorInfo> RemoteTransport::Put(absl::string_view name, const DLTensor& tensor,
                                                const PutOptions& options,
                                                const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateTransferStreams(options.streams));
  TENSORD_ASSIGN_OR_RETURN(CompactSource source, CompactSourceOf(tensor));

  v1::PutRequest header_message;
  v1::PutHeader* header = header_message.mutable_header();
  header->set_name(std::string(name));
  LayoutToProto(source.layout, header->mutable_layout());
  header->mutable_layout()->clear_strides();  // compact
  if (options.device.has_value()) {
    header->mutable_layout()->mutable_device()->set_type(options.device->device_type);
    header->mutable_layout()->mutable_device()->set_id(options.device->device_id);
  }
  header->set_total_bytes(source.size);
  if (options.send_crc32c) header->set_crc32c(Crc32c(source.data, source.size));
  header->set_retention(static_cast<v1::Retention>(options.retention));
  header->set_replicas(options.replicas);

  return rep_->plan.Put(header_message, source.data, source.size, options, call);
}

absl::StatusOr<BatchPutResult> RemoteTransport::BatchPut(std::span<const BatchPutItem> items,
                                                         const BatchPutOptions& options,
                                                         const CallOptions& call) {
  auto context = std::make_unique<CallContext>(*rep_->connection, call);
  return StreamBatchPut(rep_->connection->channel.get(), rep_->connection->batch_put_method,
                        std::move(context), items, options, rep_->connection->options.chunk_bytes);
}

absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> RemoteTransport::BatchFetch(
    const BatchSelection& selection, const FetchOptions& options, const CallOptions& call) {
  CallContext context(*rep_->connection, call);
  return StreamBatchFetch(rep_->connection->channel.get(), rep_->connection->batch_fetch_method,
                          context.get(), selection, options, *rep_->receive_pool);
}

absl::StatusOr<Tensor> RemoteTransport::Fetch(absl::string_view name, const FetchOptions& options,
                                              const CallOptions& call) {
  std::shared_ptr<HeapTensorMemory> memory;
  TENSORD_ASSIGN_OR_RETURN(TensorInfo info,
                           rep_->plan.Fetch(
                               name, options, call,
                               [&](const TensorInfo& header, uint64_t) -> absl::StatusOr<uint8_t*> {
                                 TENSORD_ASSIGN_OR_RETURN(
                                     memory, rep_->receive_pool->Allocate(header.total_bytes));
                                 return static_cast<uint8_t*>(memory->data());
                               },
                               /*expected_bytes=*/std::nullopt));
  return Tensor(std::move(info), std::move(memory));
}

absl::StatusOr<TensorInfo> RemoteTransport::FetchInto(absl::string_view name,
                                                      const DLTensor& destination,
                                                      const FetchOptions& options,
                                                      const CallOptions& call) {
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout target, dlpack::LayoutOf(destination));
  // The destination's size tells whether the tensor can come inline.
  absl::StatusOr<uint64_t> destination_bytes = dlpack::CompactByteSize(target.dtype, target.shape);
  std::shared_ptr<HeapTensorMemory> staging;
  bool direct = false;
  TENSORD_ASSIGN_OR_RETURN(
      TensorInfo info,
      rep_->plan.Fetch(
          name, options, call,
          [&](const TensorInfo& header, uint64_t) -> absl::StatusOr<uint8_t*> {
            TENSORD_RETURN_IF_ERROR(CheckDestinationMatches(target, header));
            direct = header.byte_offset == 0 && dlpack::IsCompact(LayoutOfInfo(header)) &&
                     dlpack::IsCompact(target);
            if (direct) {
              return static_cast<uint8_t*>(destination.data) + target.byte_offset;
            }
            TENSORD_ASSIGN_OR_RETURN(staging, rep_->receive_pool->Allocate(header.total_bytes));
            return static_cast<uint8_t*>(staging->data());
          },
          destination_bytes.ok() ? std::optional<uint64_t>(*destination_bytes) : std::nullopt));
  if (!direct) {
    TENSORD_RETURN_IF_ERROR(
        dlpack::CopyStrided(staging->data(), LayoutOfInfo(info), destination.data, target));
  }
  return info;
}

absl::StatusOr<std::unique_ptr<TensorWriter>> RemoteTransport::Create(
    absl::string_view /*name*/, DLDataType /*dtype*/, std::span<const int64_t> /*shape*/,
    const CreateOptions& /*options*/, const CallOptions& call) {
  return absl::UnavailableError("create/seal needs local handoff, which is not reachable");
}

absl::StatusOr<TensorInfo> RemoteTransport::FetchBytes(absl::string_view name, uint64_t offset,
                                                       uint64_t length, std::string& out,
                                                       const FetchOptions& options,
                                                       const CallOptions& call) {
  v1::FetchRequest request = FetchRequestFor(name, options);
  request.mutable_range()->set_offset(offset);
  request.mutable_range()->set_length(length);
  const size_t start = out.size();
  CallContext context(*rep_->connection, call);
  TENSORD_ASSIGN_OR_RETURN(
      StreamedRange fetched,
      rep_->connection->StreamFetch(
          *rep_->connection->channel, context.get(), request, options,
          [&](const TensorInfo&, uint64_t range_length) -> absl::StatusOr<uint8_t*> {
            out.resize(start + range_length);
            return reinterpret_cast<uint8_t*>(out.data() + start);
          }));
  return std::move(fetched.info);
}

absl::StatusOr<TensorInfo> RemoteTransport::Stat(absl::string_view name, uint64_t version,
                                                 const CallOptions& call) {
  CallContext context(*rep_->connection, call);
  grpc::ByteBuffer answer;
  TENSORD_RETURN_IF_ERROR(FromGrpcStatus(
      UnaryByteCall(*rep_->connection->channel, rep_->connection->stat_method, context.get(),
                    NameVersionRequest{.name = name, .version = version}, answer)));
  grpc::Slice bytes;
  if (!FlattenByteBuffer(answer, bytes, "Stat answer").ok()) {
    return absl::InternalError("Stat answer is unreadable");
  }
  WireTensorInfo info;
  if (!ParseWireStatResponse({bytes.begin(), bytes.size()}, info)) {
    return absl::InternalError(
        absl::StrCat("server sent a malformed Stat answer for '", name, "'"));
  }
  return InfoFromWire(std::move(info));
}

absl::StatusOr<ListResult> RemoteTransport::List(absl::string_view prefix, uint32_t page_size,
                                                 absl::string_view page_token, bool cluster,
                                                 const CallOptions& call) {
  v1::ListRequest request;
  request.set_prefix(std::string(prefix));
  request.set_page_size(page_size);
  request.set_page_token(std::string(page_token));
  request.set_cluster(cluster);
  v1::ListResponse response;
  TENSORD_RETURN_IF_ERROR(
      rep_->connection->Call(&TensorServiceClient::List, request, response, call));
  ListResult result;
  for (const v1::TensorInfo& proto : response.tensors()) {
    // Cluster entries carry a node and no layout: InfoFromProto takes them as they are.
    TENSORD_ASSIGN_OR_RETURN(TensorInfo info, InfoFromProto(proto));
    result.tensors.push_back(std::move(info));
  }
  result.next_page_token = response.next_page_token();
  result.total_bytes = response.total_bytes();
  return result;
}

absl::StatusOr<std::unique_ptr<WatchStream>> RemoteTransport::Watch(absl::string_view prefix,
                                                                    const WatchOptions& options,
                                                                    const CallOptions& call) {
  v1::WatchRequest request;
  request.set_prefix(std::string(prefix));
  request.set_from_version(options.from_version);
  request.set_send_existing(options.send_existing);
  request.set_cluster(options.cluster);
  // The timeout bounds only the wait for the watch to start; a
  // cancellation ends the watch whenever it comes.
  auto context = std::make_unique<CallContext>(*rep_->connection, call, /*with_deadline=*/false);
  return StartWatchStream(rep_->connection->channel.get(), rep_->connection->watch_method,
                          std::move(context), request, options.max_buffered_events,
                          call.timeout.value_or(rep_->connection->options.timeout));
}

absl::StatusOr<uint64_t> RemoteTransport::Delete(absl::string_view name, uint64_t version,
                                                 const CallOptions& call) {
  v1::DeleteRequest request;
  request.set_name(std::string(name));
  request.set_version(version);
  v1::DeleteResponse response;
  TENSORD_RETURN_IF_ERROR(
      rep_->connection->Call(&TensorServiceClient::Delete, request, response, call));
  return response.version();
}

absl::StatusOr<SnapshotResult> RemoteTransport::Snapshot(const CallOptions& call) {
  v1::SnapshotResponse response;
  TENSORD_RETURN_IF_ERROR(rep_->connection->Call(&TensorServiceClient::Snapshot,
                                                 v1::SnapshotRequest(), response, call));
  return SnapshotResult{.path = response.path(),
                        .tensor_count = response.tensor_count(),
                        .total_bytes = response.total_bytes()};
}

absl::StatusOr<std::string> RemoteTransport::Health(absl::string_view service,
                                                    const CallOptions& call) {
  auto health = grpc::health::v1::Health::NewStub(rep_->connection->channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(service));
  grpc::health::v1::HealthCheckResponse response;
  TENSORD_RETURN_IF_ERROR(rep_->connection->Unary(*health, &grpc::health::v1::Health::Stub::Check,
                                                  request, response, call));
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

absl::StatusOr<ServerHandoffInfo> RemoteTransport::GetServerInfo() {
  v1::GetServerInfoResponse info;
  TENSORD_RETURN_IF_ERROR(rep_->connection->Call(&TensorServiceClient::GetServerInfo,
                                                 v1::GetServerInfoRequest(), info, CallOptions{}));
  return ServerHandoffInfo{.handoff_socket = info.handoff_socket(), .boot_id = info.boot_id()};
}

absl::StatusOr<ClusterMembers> RemoteTransport::ClusterNodes(const CallOptions& call) {
  v1::GetServerInfoResponse info;
  TENSORD_RETURN_IF_ERROR(rep_->connection->Call(&TensorServiceClient::GetServerInfo,
                                                 v1::GetServerInfoRequest(), info, call));
  ClusterMembers members{.node_name = info.node_name(), .nodes = {}};
  for (const v1::ClusterMember& member : info.cluster_members()) {
    members.nodes.push_back(
        ClusterNode{.name = member.node_name(),
                    .advertise_address = member.advertise_address(),
                    .handoff_available = member.handoff_available(),
                    .host_bytes_used = member.host_bytes_used(),
                    .host_bytes_limit = member.host_bytes_limit(),
                    .server_version = member.server_version(),
                    .started = absl::FromUnixMillis(member.start_time_unix_ms())});
  }
  return members;
}

absl::StatusOr<std::string> RemoteTransport::IssueHandoffToken() {
  v1::IssueHandoffTokenResponse response;
  TENSORD_RETURN_IF_ERROR(rep_->connection->Call(&TensorServiceClient::IssueHandoffToken,
                                                 v1::IssueHandoffTokenRequest(), response,
                                                 CallOptions{}));
  return response.token();
}

}  // namespace tensord
