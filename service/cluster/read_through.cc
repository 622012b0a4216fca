#include "service/cluster/read_through.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/common/crc32c.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/channel_arg_milliseconds.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/status_conversion.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {
namespace {

constexpr char kFetchMethod[] = "/tensord.v1.TensorService/Fetch";
// A holder may replace the version between the lookup and the pull.
constexpr int kLocateAttempts = 3;

}  // namespace

ReadThrough::ReadThrough(std::shared_ptr<ClusterDirectory> directory, Registry& registry,
                         ReadThroughOptions options)
    : directory_(std::move(directory)), registry_(registry), options_(std::move(options)) {
  const size_t threads = std::max<size_t>(options_.threads, 1);
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { WorkLoop(); });
}

ReadThrough::~ReadThrough() {
  std::deque<Job> abandoned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    abandoned.swap(queue_);
    for (grpc::ClientContext* pull : pulling_) pull->TryCancel();
    work_ready_.notify_all();
  }
  for (std::thread& thread : threads_) thread.join();
  // Queued work never ran: its callers hear why.
  for (Job& job : abandoned) {
    if (job.abandon) std::move(job.abandon)();
  }
  std::vector<Done> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, dones] : in_flight_) {
      for (Done& done : dones) waiting.push_back(std::move(done));
    }
    in_flight_.clear();
  }
  for (Done& done : waiting) {
    std::move(done)(absl::UnavailableError("the server is shutting down"));
  }
}

void ReadThrough::Enqueue(Work work, Work abandon) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(Job{std::move(work), std::move(abandon)});
      work_ready_.notify_one();
      return;
    }
  }
  if (abandon) std::move(abandon)();
}

void ReadThrough::WorkLoop() {
  while (true) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      work = std::move(queue_.front().work);
      queue_.pop_front();
    }
    std::move(work)();
  }
}

void ReadThrough::PullLatest(std::string name, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      // Outside the lock below.
    } else if (auto it = in_flight_.find(name); it != in_flight_.end()) {
      joined_.fetch_add(1, std::memory_order_relaxed);
      it->second.push_back(std::move(done));
      return;
    } else {
      in_flight_[name].push_back(std::move(done));
      // Abandoned at shutdown, its waiters are answered from in_flight_.
      queue_.push_back(Job{.work = [this, name] {
        const absl::Status status = Pull(name);
        std::vector<Done> waiting;
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = in_flight_.find(name);
          if (it != in_flight_.end()) {
            waiting = std::move(it->second);
            in_flight_.erase(it);
          }
        }
        for (Done& waiter : waiting) std::move(waiter)(status);
      }});
      work_ready_.notify_one();
      return;
    }
  }
  std::move(done)(absl::UnavailableError("the server is shutting down"));
}

ReadThroughStats ReadThrough::stats() const {
  return ReadThroughStats{.pulls = pulls_.load(std::memory_order_relaxed),
                          .pulled_bytes = pulled_bytes_.load(std::memory_order_relaxed),
                          .pull_failures = pull_failures_.load(std::memory_order_relaxed),
                          .joined = joined_.load(std::memory_order_relaxed)};
}

absl::Status ReadThrough::Pull(const std::string& name) {
  for (int attempt = 0; attempt < kLocateAttempts; ++attempt) {
    const uint64_t held = registry_.LatestVersionOf(name);
    TENSORD_ASSIGN_OR_RETURN(NameLocation location, directory_->Locate(name));
    if (location.origin == 0) {
      if (held != 0) return absl::OkStatus();
      return absl::NotFoundError(
          absl::StrCat("tensor '", name, "' is not held by this node nor any node of the cluster"));
    }
    if (held != 0 && directory_->OriginOf(name, held) >= location.origin) return absl::OkStatus();
    std::vector<std::string> failures;
    bool relocate = false;
    for (const HolderRecord& holder : location.holders) {
      const absl::Status pulled = PullFrom(holder, held, Retention::kCache);
      if (pulled.ok()) return absl::OkStatus();
      if (pulled.code() == absl::StatusCode::kAborted ||
          pulled.code() == absl::StatusCode::kNotFound) {
        relocate = true;  // a newer version here or at the holder: look again
        break;
      }
      if (pulled.code() == absl::StatusCode::kFailedPrecondition ||
          pulled.code() == absl::StatusCode::kResourceExhausted ||
          pulled.code() == absl::StatusCode::kDataLoss) {
        return pulled;  // the same at every holder
      }
      pull_failures_.fetch_add(1, std::memory_order_relaxed);
      failures.push_back(absl::StrCat(holder.node, " at ", holder.address, ": ", pulled.message()));
    }
    if (!relocate) {
      return absl::UnavailableError(absl::StrCat(
          "tensor '", name, "' is held only by nodes this node could not pull it from: ",
          absl::StrJoin(failures, "; ")));
    }
  }
  return absl::AbortedError(absl::StrCat("tensor '", name, "' kept changing while pulled (",
                                         kLocateAttempts, " attempts); retry"));
}

absl::Duration PeerIdleTimeout(absl::Duration server_idle_timeout) {
  if (server_idle_timeout <= absl::ZeroDuration()) return absl::InfiniteDuration();
  return std::max(absl::Seconds(1), server_idle_timeout * 2 / 5);
}

std::shared_ptr<grpc::Channel> ReadThrough::ChannelTo(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (channel == nullptr) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(options_.max_message_bytes);
    arguments.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS,
                     ChannelArgMilliseconds(options_.peer_connection_idle_timeout));
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (!options_.peer_ca_pem.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = options_.peer_ca_pem;
      ssl.pem_cert_chain = options_.client_cert_pem;
      ssl.pem_private_key = options_.client_key_pem;
      credentials = grpc::SslCredentials(ssl);
      if (!options_.peer_tls_server_name.empty()) {
        arguments.SetSslTargetNameOverride(options_.peer_tls_server_name);
      }
    }
    channel = grpc::CreateCustomChannel(address, credentials, arguments);
  }
  return channel;
}

absl::Status ReadThrough::PullFrom(const HolderRecord& holder, uint64_t held_version,
                                   Retention retention) {
  std::shared_ptr<grpc::Channel> channel = ChannelTo(holder.address);
  const grpc::internal::RpcMethod method(kFetchMethod, grpc::internal::RpcMethod::SERVER_STREAMING,
                                         channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.pull_timeout));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    pulling_.insert(&context);
  }
  struct Unlist {
    ReadThrough* self;
    grpc::ClientContext* context;
    ~Unlist() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->pulling_.erase(context);
    }
  } unlist{this, &context};
  if (!options_.bearer_token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.bearer_token));
  }
  v1::FetchRequest request;
  request.set_name(holder.name);
  request.set_version(holder.version);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel.get(), method, &context, SerializeToByteBuffer(request)));
  grpc::ByteBuffer message;
  ByteBufferDecoder decoder;
  std::optional<PendingVersion> pending;
  uint32_t crc32c = 0;
  uint64_t received = 0;
  // Computed while the bytes are hot, so Publish checks it against the
  // holder's instead of reading the whole version again.
  uint32_t received_crc = 0;
  uint64_t total = 0;
  absl::Status failure;
  auto receive = [&]() -> absl::Status {
    TENSORD_RETURN_IF_ERROR(decoder.Decode(message));
    const StreamMessage& decoded = decoder.message();
    if (!pending.has_value()) {
      v1::FetchHeader header;
      if (decoded.kind != StreamMessage::Kind::kHeader || !header.ParseFromString(decoded.header)) {
        return absl::DataLossError(absl::StrCat("node ", holder.node, " began the fetch of '",
                                                holder.name, "' without a header"));
      }
      TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout layout, LayoutFromProto(header.info().layout()));
      if (layout.device.device_type != kDLCPU) {
        return absl::FailedPreconditionError(absl::StrCat(
            "tensor '", holder.name, "' is a device tensor on node ", holder.node,
            "; read-through copies host tensors only: fetch it from ", holder.address));
      }
      total = header.info().total_bytes();
      // The directory said what the version is; a holder answering with
      // something else (another size, other bytes) is not trusted.
      if (total != holder.total_bytes || header.info().crc32c() != holder.crc32c) {
        return absl::DataLossError(absl::StrCat(
            "node ", holder.node, " sent '", holder.name, "' v", holder.version, " as ", total,
            " bytes with CRC-32C ", header.info().crc32c(), "; the directory lists ",
            holder.total_bytes, " bytes with ", holder.crc32c));
      }
      if (header.range().offset() != 0 || header.range().length() != total ||
          header.info().version() != holder.version) {
        return absl::DataLossError(absl::StrCat("node ", holder.node, " answered the fetch of '",
                                                holder.name, "' v", holder.version,
                                                " with another version or range"));
      }
      crc32c = header.info().crc32c();
      TENSORD_ASSIGN_OR_RETURN(PendingVersion prepared,
                               registry_.Prepare(holder.name, std::move(layout), total,
                                                 retention));
      prepared.only_if_latest = held_version;
      pending = std::move(prepared);
      if (header.has_inline_data()) {
        if (header.inline_data().size() != total) {
          return absl::DataLossError(absl::StrCat("node ", holder.node, " sent ",
                                                  header.inline_data().size(), " inline bytes of '",
                                                  holder.name, "', which has ", total));
        }
        TENSORD_RETURN_IF_ERROR(pending->buffer->Write(0, header.inline_data().data(), total));
        received_crc = Crc32cExtend(received_crc, header.inline_data().data(), total);
        received = total;
      }
      return absl::OkStatus();
    }
    if (decoded.kind != StreamMessage::Kind::kChunk || decoded.chunk_offset != received ||
        decoded.chunk_size > total - received) {
      return absl::DataLossError(absl::StrCat("node ", holder.node, " sent a chunk of '",
                                              holder.name, "' at ", decoded.chunk_offset,
                                              " where ", received, " was next"));
    }
    TENSORD_RETURN_IF_ERROR(pending->buffer->Write(received, decoded.chunk_pieces));
    for (std::span<const uint8_t> piece : decoded.chunk_pieces) {
      received_crc = Crc32cExtend(received_crc, piece.data(), piece.size());
    }
    received += decoded.chunk_size;
    return absl::OkStatus();
  };
  while (failure.ok() && !(pending.has_value() && received == total) && reader->Read(&message)) {
    failure = receive();
  }
  if (!failure.ok()) context.TryCancel();
  const grpc::Status finished = reader->Finish();
  TENSORD_RETURN_IF_ERROR(failure);
  TENSORD_RETURN_IF_ERROR(FromGrpcStatus(finished));
  if (!pending.has_value() || received != total) {
    return absl::DataLossError(absl::StrCat("node ", holder.node, " ended the fetch of '",
                                            holder.name, "' after ", received, " of ", total,
                                            " bytes"));
  }
  pending->crc32c = received_crc;
  absl::StatusOr<VersionInfo> published =
      directory_->PublishReplica(*std::move(pending), crc32c, holder);
  if (!published.ok()) return published.status();
  pulls_.fetch_add(1, std::memory_order_relaxed);
  pulled_bytes_.fetch_add(total, std::memory_order_relaxed);
  Log(LogLevel::kInfo, "cluster_pulled",
      {{"name", holder.name}, {"version", published->version}, {"from", holder.node},
       {"bytes", total}, {"origin", holder.origin}});
  return absl::OkStatus();
}

}  // namespace tensord
