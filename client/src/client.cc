#include "absl/strings/string_view.h"
#include "tensord/client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <cstring>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/common/mutex.h"
#include "client/src/heap_tensor_memory.h"
#include "client/src/info_conversion.h"
#include "client/src/local_handoff.h"
#include "service/common/host_identity.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/strided_copy.h"
#include "service/registry/tensor_name.h"
#include "service/security/pem_source.h"
#include "service/transport/byte_buffer_codec.h"
#include "service/transport/layout_conversion.h"
#include "service/transport/request_id.h"
#include "service/transport/status_conversion.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord {
namespace {

constexpr char kPutMethod[] = "/tensord.v1.TensorService/Put";
constexpr char kFetchMethod[] = "/tensord.v1.TensorService/Fetch";

// Counts chunk slices gRPC still holds; Put returns only once it holds none,
// because they point into the caller's memory.
class SliceLatch {
 public:
  void Add() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++outstanding_;
  }
  static void Release(void* latch) { static_cast<SliceLatch*>(latch)->Done(); }
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    released_.wait(lock, [this] { return outstanding_ == 0; });
  }

 private:
  void Done() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--outstanding_ == 0) released_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable released_;
  int outstanding_ = 0;
};

// The compact bytes of a caller's tensor: its own memory when already
// compact, a packed copy otherwise.
struct CompactSource {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  dlpack::TensorLayout layout;  // compact, byte_offset 0
  std::shared_ptr<HeapTensorMemory> packed;
};

// A host tensor whose layout is sound: known dtype, sane shape and strides,
// data present when there are elements. `what` names it in errors.
absl::Status ValidateHostTensor(const DLTensor& tensor, absl::string_view what) {
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout layout, dlpack::LayoutOf(tensor));
  if (layout.device.device_type != kDLCPU && layout.device.device_type != kDLCUDAHost) {
    return absl::InvalidArgumentError(absl::StrCat(what, " device type ",
                                                   layout.device.device_type, " is not host memory"));
  }
  TENSORD_ASSIGN_OR_RETURN(uint64_t size, dlpack::CompactByteSize(layout.dtype, layout.shape));
  if (size > 0 && tensor.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, " data is NULL but it has elements"));
  }
  // The caller's allocation may start before element 0 (negative strides);
  // count from there, so only overflow and inconsistency are errors.
  TENSORD_ASSIGN_OR_RETURN(uint64_t before, dlpack::BytesBeforeFirstElement(layout));
  if (__builtin_add_overflow(layout.byte_offset, before, &layout.byte_offset)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " byte_offset overflows"));
  }
  return dlpack::RequiredBytes(layout).status();
}

// `tensor` has passed ValidateHostTensor.
absl::StatusOr<CompactSource> CompactSourceOf(const DLTensor& tensor) {
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout layout, dlpack::LayoutOf(tensor));
  TENSORD_ASSIGN_OR_RETURN(uint64_t size, dlpack::CompactByteSize(layout.dtype, layout.shape));
  CompactSource source;
  source.size = size;
  source.layout.dtype = layout.dtype;
  source.layout.shape = layout.shape;
  if (size == 0) return source;
  if (dlpack::IsCompact(layout)) {
    source.data = static_cast<const uint8_t*>(tensor.data) + layout.byte_offset;
    return source;
  }
  TENSORD_ASSIGN_OR_RETURN(source.packed, HeapTensorMemory::Allocate(size));
  TENSORD_RETURN_IF_ERROR(
      dlpack::CopyStrided(tensor.data, layout, source.packed->data(), source.layout));
  source.data = static_cast<const uint8_t*>(source.packed->data());
  return source;
}

// TLS credentials when any TLS option is set, plaintext otherwise.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientOptions& options) {
  const bool tls = options.tls || !options.tls_root_ca.empty() ||
                   !options.tls_client_cert.empty() || !options.tls_client_key.empty();
  if (!tls) return grpc::InsecureChannelCredentials();
  if (options.tls_client_cert.empty() != options.tls_client_key.empty()) {
    return absl::InvalidArgumentError(
        "tls_client_cert and tls_client_key go together: give both or neither");
  }
  grpc::SslCredentialsOptions ssl;
  TENSORD_ASSIGN_OR_RETURN(ssl.pem_root_certs, PemFromPathOrContents(options.tls_root_ca, "tls_root_ca"));
  TENSORD_ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                           PemFromPathOrContents(options.tls_client_cert, "tls_client_cert"));
  TENSORD_ASSIGN_OR_RETURN(ssl.pem_private_key,
                           PemFromPathOrContents(options.tls_client_key, "tls_client_key"));
  return grpc::SslCredentials(ssl);
}

}  // namespace

struct Client::Rep {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::TensorService::Stub> stub;
  grpc::internal::RpcMethod put_method;
  grpc::internal::RpcMethod fetch_method;

  Rep(const ClientOptions& opts, std::shared_ptr<grpc::Channel> ch)
      : options(opts),
        channel(std::move(ch)),
        stub(v1::TensorService::NewStub(channel)),
        put_method(kPutMethod, grpc::internal::RpcMethod::CLIENT_STREAMING, channel),
        fetch_method(kFetchMethod, grpc::internal::RpcMethod::SERVER_STREAMING, channel) {}

  Mutex local_mutex;
  bool local_resolved ABSL_GUARDED_BY(local_mutex) = false;
  std::shared_ptr<LocalHandoff> local ABSL_GUARDED_BY(local_mutex);

  // The local path, found on first use: nullptr means remote. Errors only
  // with TransferPath::kLocal.
  absl::StatusOr<std::shared_ptr<LocalHandoff>> Local();
  // Forgets a local path that broke, so the next call looks again.
  void DropLocal(const std::shared_ptr<LocalHandoff>& broken);
  absl::StatusOr<std::shared_ptr<LocalHandoff>> DiscoverLocal();
  absl::StatusOr<std::string> IssueToken();

  // One unary call on `stub` with this client's deadline.
  template <typename Stub, typename Request, typename Response>
  absl::Status Unary(Stub& stub,
                     grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                     const Request& request, Response& response) const {
    grpc::ClientContext context;
    PrepareContext(context);
    return FromGrpcStatus((stub.*method)(&context, request, &response));
  }

  void PrepareContext(grpc::ClientContext& context) const {
    if (!options.bearer_token.empty()) {
      context.AddMetadata("authorization", absl::StrCat("Bearer ", options.bearer_token));
    }
    if (options.timeout != absl::InfiniteDuration()) {
      context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
    }
    if (!options.request_id.empty()) {
      context.AddMetadata(std::string(kRequestIdMetadataKey), options.request_id);
    }
  }

  // Streams `request` and copies each chunk to where `destination_for` says
  // (called once, with the header's info and range, before any chunk).
  absl::StatusOr<TensorInfo> StreamFetch(
      const v1::FetchRequest& request, const FetchOptions& options,
      absl::FunctionRef<absl::StatusOr<uint8_t*>(const TensorInfo&, uint64_t)> destination_for);
};

absl::StatusOr<std::string> Client::Rep::IssueToken() {
  v1::IssueHandoffTokenResponse response;
  TENSORD_RETURN_IF_ERROR(Unary(*stub, &v1::TensorService::Stub::IssueHandoffToken,
                                v1::IssueHandoffTokenRequest(), response));
  return response.token();
}

absl::StatusOr<std::shared_ptr<LocalHandoff>> Client::Rep::DiscoverLocal() {
  std::string path = options.handoff_socket;
  if (path.empty()) {
    v1::GetServerInfoResponse info;
    TENSORD_RETURN_IF_ERROR(
        Unary(*stub, &v1::TensorService::Stub::GetServerInfo, v1::GetServerInfoRequest(), info));
    if (info.handoff_socket().empty()) {
      return absl::UnavailableError("the server has local handoff turned off (--handoff-socket)");
    }
    if (info.boot_id().empty() || info.boot_id() != BootId()) {
      return absl::UnavailableError(absl::StrCat("the server runs on another host (boot id ",
                                                 info.boot_id(), ", ours ", BootId(), ")"));
    }
    path = info.handoff_socket();
  }
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<HandoffConnection> connection,
                           HandoffConnection::Connect(path, [this] { return IssueToken(); }));
  return std::make_shared<LocalHandoff>(std::move(connection));
}

absl::StatusOr<std::shared_ptr<LocalHandoff>> Client::Rep::Local() {
  if (options.path == TransferPath::kRemote) return nullptr;
  MutexLock lock(&local_mutex);
  if (!local_resolved) {
    absl::StatusOr<std::shared_ptr<LocalHandoff>> found = DiscoverLocal();
    if (!found.ok()) {
      if (options.path == TransferPath::kLocal) return found.status();
      found = nullptr;  // remote it is
    }
    local = std::move(*found);
    local_resolved = true;
  }
  return local;
}

void Client::Rep::DropLocal(const std::shared_ptr<LocalHandoff>& broken) {
  MutexLock lock(&local_mutex);
  if (local == broken) {
    local.reset();
    local_resolved = false;
  }
}

// Whether a failed local call should be retried over gRPC.
// Either the socket failed (UNAVAILABLE), or the server refused something
// only gRPC can serve (a tensor in device memory) and the connection is fine.
static bool ShouldFallBack(const absl::Status& status, TransferPath path) {
  return path == TransferPath::kAuto &&
         (status.code() == absl::StatusCode::kUnavailable || IsUseRemote(status));
}

Client::Client(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.server.empty()) return absl::InvalidArgumentError("server address is empty");
  if (options.chunk_bytes == 0 || options.chunk_bytes > options.max_message_bytes - 4096) {
    return absl::InvalidArgumentError(absl::StrCat("chunk_bytes ", options.chunk_bytes,
                                                   " must be in 1..max_message_bytes - 4096"));
  }
  if (!options.request_id.empty() && !IsValidRequestId(options.request_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request_id '", absl::CHexEscape(options.request_id.substr(0, kMaxRequestIdLength + 1)),
        "' is not 1..", kMaxRequestIdLength, " characters of [A-Za-z0-9._:/+=-]"));
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  arguments.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  if (options.own_connection) arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                           ChannelCredentialsFor(options));
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.server, credentials, arguments);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to '", options.server, "'"));
  }
  return std::unique_ptr<Client>(new Client(std::make_unique<Rep>(options, std::move(channel))));
}

absl::StatusOr<TensorInfo> Client::Put(absl::string_view name, const DLTensor& tensor,
                                       const PutOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_RETURN_IF_ERROR(ValidateHostTensor(tensor, "tensor"));
  // Device puts from host memory go over gRPC (the server's staged upload);
  // a local producer writes device memory in place with Create instead.
  if (options.device.has_value() && rep_->options.path == TransferPath::kLocal) {
    return absl::FailedPreconditionError(absl::StrCat(
        "put of '", name, "' into device memory (device type ", options.device->device_type,
        ", id ", options.device->device_id,
        ") needs TransferPath::kRemote or kAuto; on the server's host, Create with "
        "CreateOptions::device writes device memory in place"));
  }
  const bool remote_first = options.device.has_value() && rep_->options.path == TransferPath::kAuto;
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<LocalHandoff> local,
                           remote_first ? nullptr : rep_->Local());
  if (local != nullptr) {
    absl::StatusOr<TensorInfo> put =
        local->Put(name, tensor, options.send_crc32c, options.retention);
    if (!ShouldFallBack(put.status(), rep_->options.path)) return put;
    if (!IsUseRemote(put.status())) rep_->DropLocal(local);
  }
  return PutRemote(name, tensor, options);
}

absl::StatusOr<TensorInfo> Client::PutRemote(absl::string_view name, const DLTensor& tensor,
                                             const PutOptions& options) {
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

  SliceLatch latch;
  v1::PutResponse response;
  grpc::ClientContext context;
  rep_->PrepareContext(context);
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          rep_->channel.get(), rep_->put_method, &context, &response));
  bool open = writer->Write(SerializeToByteBuffer(header_message));
  for (uint64_t offset = 0; open && offset < source.size;) {
    const uint64_t size = std::min<uint64_t>(rep_->options.chunk_bytes, source.size - offset);
    latch.Add();
    grpc::ByteBuffer chunk =
        MakeChunkBuffer(offset, source.data + offset, size, &SliceLatch::Release, &latch);
    open = writer->Write(chunk);
    offset += size;
    if (options.progress) options.progress(offset, source.size);
  }
  if (open) writer->WritesDone();
  grpc::Status status = writer->Finish();
  writer.reset();
  latch.Wait();
  if (!status.ok()) return FromGrpcStatus(status);
  return InfoFromProto(response.info());
}

absl::StatusOr<TensorInfo> Client::Rep::StreamFetch(
    const v1::FetchRequest& request, const FetchOptions& fetch_options,
    absl::FunctionRef<absl::StatusOr<uint8_t*>(const TensorInfo&, uint64_t)> destination_for) {
  grpc::ClientContext context;
  PrepareContext(context);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel.get(), fetch_method, &context, SerializeToByteBuffer(request)));

  grpc::ByteBuffer message;
  ByteBufferDecoder decoder;
  absl::Status failure;
  std::optional<TensorInfo> info;
  uint8_t* destination = nullptr;
  uint64_t range_offset = 0, range_length = 0, received = 0;
  uint32_t crc = 0;
  // Once every byte is in, Finish at once: the server sent its status with
  // the last message, and skipping the Read that would only report the end
  // saves a round through the completion queue (a 4 KiB fetch is one
  // message: this is a third of its client-side batches).
  const auto complete = [&] { return info.has_value() && received == range_length; };
  while (failure.ok() && !complete() && reader->Read(&message)) {
    failure = decoder.Decode(message);
    if (!failure.ok()) break;
    const StreamMessage& decoded = decoder.message();
    if (!info.has_value()) {
      v1::FetchHeader header;
      if (decoded.kind != StreamMessage::Kind::kHeader || !header.ParseFromString(decoded.header)) {
        failure = absl::InternalError("fetch stream did not start with a valid header");
        break;
      }
      absl::StatusOr<TensorInfo> parsed = InfoFromProto(header.info());
      if (!parsed.ok()) {
        failure = parsed.status();
        break;
      }
      info = std::move(*parsed);
      range_offset = header.range().offset();
      range_length = header.range().length();
      if (range_offset > info->total_bytes || range_length > info->total_bytes - range_offset) {
        failure = absl::InternalError(absl::StrCat("server sent range [", range_offset, ", +",
                                                   range_length, ") of a ", info->total_bytes,
                                                   "-byte tensor"));
        break;
      }
      absl::StatusOr<uint8_t*> where = destination_for(*info, range_length);
      if (!where.ok()) {
        failure = where.status();
        break;
      }
      destination = *where;
      if (header.has_inline_data()) {
        if (header.inline_data().size() != range_length) {
          failure = absl::InternalError(absl::StrCat("fetch header carried ",
                                                     header.inline_data().size(), " inline bytes of a ",
                                                     range_length, "-byte range"));
          break;
        }
        std::memcpy(destination, header.inline_data().data(), range_length);
        if (fetch_options.verify_crc32c) crc = Crc32cExtend(crc, destination, range_length);
        received = range_length;
        if (fetch_options.progress) fetch_options.progress(received, range_length);
      }
      continue;
    }
    if (decoded.kind != StreamMessage::Kind::kChunk ||
        decoded.chunk_offset != range_offset + received ||
        decoded.chunk_size > range_length - received) {
      failure = absl::InternalError(absl::StrCat(
          "fetch stream sent an unexpected message at byte ", received, " of ", range_length));
      break;
    }
    uint8_t* out = destination + received;
    for (std::span<const uint8_t> piece : decoded.chunk_pieces) {
      std::memcpy(out, piece.data(), piece.size());
      if (fetch_options.verify_crc32c) crc = Crc32cExtend(crc, out, piece.size());
      out += piece.size();
    }
    received += decoded.chunk_size;
    if (fetch_options.progress) fetch_options.progress(received, range_length);
  }
  if (!failure.ok()) context.TryCancel();
  grpc::Status status = reader->Finish();
  TENSORD_RETURN_IF_ERROR(failure);
  TENSORD_RETURN_IF_ERROR(FromGrpcStatus(status));
  if (!info.has_value()) return absl::InternalError("fetch stream ended without a header");
  if (received != range_length) {
    return absl::DataLossError(absl::StrCat("fetch of '", info->name, "' ended after ", received,
                                            " of ", range_length, " bytes"));
  }
  if (fetch_options.verify_crc32c && range_offset == 0 && range_length == info->total_bytes &&
      crc != info->crc32c) {
    return absl::DataLossError(absl::StrCat("fetched bytes of '", info->name, "' have crc32c ", crc,
                                            "; the server stored ", info->crc32c));
  }
  return *std::move(info);
}

absl::StatusOr<Tensor> Client::Fetch(absl::string_view name, const FetchOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<LocalHandoff> local, rep_->Local());
  if (local != nullptr) {
    absl::StatusOr<Tensor> fetched =
        local->Fetch(name, options.version, options.read_only, options.device_to_host);
    if (!ShouldFallBack(fetched.status(), rep_->options.path)) return fetched;
    if (!IsUseRemote(fetched.status())) rep_->DropLocal(local);
  }
  v1::FetchRequest request;
  request.set_name(std::string(name));
  request.set_version(options.version);
  std::shared_ptr<HeapTensorMemory> memory;
  TENSORD_ASSIGN_OR_RETURN(
      TensorInfo info,
      rep_->StreamFetch(request, options,
                        [&](const TensorInfo& header, uint64_t) -> absl::StatusOr<uint8_t*> {
                          TENSORD_ASSIGN_OR_RETURN(memory,
                                                   HeapTensorMemory::Allocate(header.total_bytes));
                          return static_cast<uint8_t*>(memory->data());
                        }));
  return Tensor(std::move(info), std::move(memory));
}

absl::StatusOr<TensorInfo> Client::FetchInto(absl::string_view name, const DLTensor& destination,
                                             const FetchOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_RETURN_IF_ERROR(ValidateHostTensor(destination, "destination"));
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<LocalHandoff> local, rep_->Local());
  if (local != nullptr) {
    absl::StatusOr<TensorInfo> fetched = local->FetchInto(name, options.version, destination);
    if (!ShouldFallBack(fetched.status(), rep_->options.path)) return fetched;
    if (!IsUseRemote(fetched.status())) rep_->DropLocal(local);
  }
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout target, dlpack::LayoutOf(destination));
  v1::FetchRequest request;
  request.set_name(std::string(name));
  request.set_version(options.version);
  std::shared_ptr<HeapTensorMemory> staging;
  bool direct = false;
  TENSORD_ASSIGN_OR_RETURN(
      TensorInfo info,
      rep_->StreamFetch(
          request, options, [&](const TensorInfo& header, uint64_t) -> absl::StatusOr<uint8_t*> {
            if (!dlpack::operator==(header.dtype, target.dtype) || header.shape != target.shape) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "destination ", dlpack::DescribeLayout(target), " does not match tensor '",
                  header.name, "' ", dlpack::DescribeLayout(LayoutOfInfo(header))));
            }
            direct = header.byte_offset == 0 && dlpack::IsCompact(LayoutOfInfo(header)) &&
                     dlpack::IsCompact(target);
            if (direct) {
              return static_cast<uint8_t*>(destination.data) + target.byte_offset;
            }
            TENSORD_ASSIGN_OR_RETURN(staging, HeapTensorMemory::Allocate(header.total_bytes));
            return static_cast<uint8_t*>(staging->data());
          }));
  if (!direct) {
    TENSORD_RETURN_IF_ERROR(
        dlpack::CopyStrided(staging->data(), LayoutOfInfo(info), destination.data, target));
  }
  return info;
}

absl::StatusOr<TensorInfo> Client::FetchBytes(absl::string_view name, uint64_t offset,
                                              uint64_t length, std::string& out,
                                              const FetchOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  v1::FetchRequest request;
  request.set_name(std::string(name));
  request.set_version(options.version);
  request.mutable_range()->set_offset(offset);
  request.mutable_range()->set_length(length);
  const size_t start = out.size();
  return rep_->StreamFetch(request, options,
                           [&](const TensorInfo&, uint64_t range_length) -> absl::StatusOr<uint8_t*> {
                             out.resize(start + range_length);
                             return reinterpret_cast<uint8_t*>(out.data() + start);
                           });
}

absl::StatusOr<TensorInfo> Client::Stat(absl::string_view name, uint64_t version) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  v1::StatRequest request;
  request.set_name(std::string(name));
  request.set_version(version);
  v1::StatResponse response;
  TENSORD_RETURN_IF_ERROR(rep_->Unary(*rep_->stub, &v1::TensorService::Stub::Stat, request, response));
  return InfoFromProto(response.info());
}

absl::StatusOr<ListResult> Client::List(absl::string_view prefix, uint32_t page_size,
                                        absl::string_view page_token) {
  v1::ListRequest request;
  request.set_prefix(std::string(prefix));
  request.set_page_size(page_size);
  request.set_page_token(std::string(page_token));
  v1::ListResponse response;
  TENSORD_RETURN_IF_ERROR(rep_->Unary(*rep_->stub, &v1::TensorService::Stub::List, request, response));
  ListResult result;
  for (const v1::TensorInfo& proto : response.tensors()) {
    TENSORD_ASSIGN_OR_RETURN(TensorInfo info, InfoFromProto(proto));
    result.tensors.push_back(std::move(info));
  }
  result.next_page_token = response.next_page_token();
  result.total_bytes = response.total_bytes();
  return result;
}

absl::StatusOr<std::vector<TensorInfo>> Client::ListAll(absl::string_view prefix) {
  std::vector<TensorInfo> all;
  std::string token;
  do {
    TENSORD_ASSIGN_OR_RETURN(ListResult page, List(prefix, 1000, token));
    for (TensorInfo& info : page.tensors) all.push_back(std::move(info));
    token = std::move(page.next_page_token);
  } while (!token.empty());
  return all;
}

absl::StatusOr<uint64_t> Client::Delete(absl::string_view name, uint64_t version) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  v1::DeleteRequest request;
  request.set_name(std::string(name));
  request.set_version(version);
  v1::DeleteResponse response;
  TENSORD_RETURN_IF_ERROR(
      rep_->Unary(*rep_->stub, &v1::TensorService::Stub::Delete, request, response));
  return response.version();
}

absl::StatusOr<std::unique_ptr<TensorWriter>> Client::Create(absl::string_view name,
                                                             DLDataType dtype,
                                                             std::span<const int64_t> shape,
                                                             Retention retention) {
  CreateOptions options;
  options.retention = retention;
  return Create(name, dtype, shape, options);
}

absl::StatusOr<std::unique_ptr<TensorWriter>> Client::Create(absl::string_view name,
                                                             DLDataType dtype,
                                                             std::span<const int64_t> shape,
                                                             const CreateOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<LocalHandoff> local, rep_->Local());
  if (local == nullptr) {
    return absl::UnavailableError("create/seal needs local handoff, which is not reachable");
  }
  return local->Create(name, dtype, shape, options.retention, options.device);
}

absl::StatusOr<SnapshotResult> Client::Snapshot() {
  v1::SnapshotResponse response;
  TENSORD_RETURN_IF_ERROR(rep_->Unary(*rep_->stub, &v1::TensorService::Stub::Snapshot,
                                      v1::SnapshotRequest(), response));
  return SnapshotResult{.path = response.path(),
                        .tensor_count = response.tensor_count(),
                        .total_bytes = response.total_bytes()};
}

absl::StatusOr<std::string> Client::Health(absl::string_view service) {
  auto stub = grpc::health::v1::Health::NewStub(rep_->channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(service));
  grpc::health::v1::HealthCheckResponse response;
  TENSORD_RETURN_IF_ERROR(
      rep_->Unary(*stub, &grpc::health::v1::Health::Stub::Check, request, response));
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

bool Client::local() const {
  absl::StatusOr<std::shared_ptr<LocalHandoff>> local = rep_->Local();
  return local.ok() && *local != nullptr;
}

}  // namespace tensord
