#include "service/cluster/peer_pull.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/status_conversion.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {
namespace {

constexpr char kFetchMethod[] = "/tensord.v1.TensorService/Fetch";

// Receives one Fetch stream into a registry buffer.
class PullReceiver {
 public:
  PullReceiver(Registry& registry, const PullSource& source, Retention retention)
      : registry_(registry), source_(source), retention_(retention) {}

  absl::Status Receive(const grpc::ByteBuffer& message) {
    // The header's inline bytes are viewed in place, not copied out.
    TENSORD_RETURN_IF_ERROR(decoder_.Decode(message, HeaderInlineData::kLift));
    const StreamMessage& decoded = decoder_.message();
    return pending_.has_value() ? ReceiveChunk(decoded) : ReceiveHeader(decoded);
  }
  bool complete() const { return pending_.has_value() && received_ == total_; }

  absl::StatusOr<PendingVersion> Finish() {
    if (!complete()) {
      return absl::DataLossError(absl::StrCat("node ", source_.node, " ended the copy of '",
                                              source_.name, "' after ", received_, " of ", total_,
                                              " bytes"));
    }
    if (crc_ != source_.crc32c) {
      return absl::DataLossError(absl::StrCat("node ", source_.node, " sent bytes of '",
                                              source_.name, "' with CRC-32C ", crc_,
                                              "; the cluster recorded ", source_.crc32c));
    }
    pending_->crc32c = crc_;
    return *std::move(pending_);
  }

 private:
  absl::Status ReceiveHeader(const StreamMessage& decoded) {
    v1::FetchHeader header;
    if (decoded.kind != StreamMessage::Kind::kHeader || !header.ParseFromString(decoded.header)) {
      return absl::DataLossError(absl::StrCat("node ", source_.node, " began the copy of '",
                                              source_.name, "' without a header"));
    }
    TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout layout, LayoutFromProto(header.info().layout()));
    // Kept here as host bytes: this node may have no device, and a reader
    // through it asked for the bytes, not for a place.
    layout.device = DLDevice{kDLCPU, 0};
    total_ = header.info().total_bytes();
    // What the cluster recorded is what must arrive; a holder answering
    // with something else (another size, other bytes) is not trusted.
    if (total_ != source_.total_bytes || header.info().crc32c() != source_.crc32c) {
      return absl::DataLossError(absl::StrCat("node ", source_.node, " offered '", source_.name,
                                              "' as ", total_, " bytes with CRC-32C ",
                                              header.info().crc32c(), "; the cluster recorded ",
                                              source_.total_bytes, " bytes with ", source_.crc32c));
    }
    if (header.range().offset() != 0 || header.range().length() != total_ ||
        (source_.version != 0 && header.info().version() != source_.version)) {
      return absl::DataLossError(absl::StrCat("node ", source_.node, " answered the copy of '",
                                              source_.name, "' with another version or range"));
    }
    TENSORD_ASSIGN_OR_RETURN(
        PendingVersion prepared,
        registry_.Prepare(source_.name, std::move(layout), total_, retention_));
    pending_ = std::move(prepared);
    if (decoded.has_inline_data) {
      uint64_t size = 0;
      for (std::span<const uint8_t> piece : decoded.inline_data) size += piece.size();
      if (size != total_) {
        return absl::DataLossError(absl::StrCat("node ", source_.node, " sent ", size,
                                                " inline bytes of '", source_.name, "', which has ",
                                                total_));
      }
      return Write(decoded.inline_data, size);
    }
    return absl::OkStatus();
  }

  absl::Status ReceiveChunk(const StreamMessage& decoded) {
    if (decoded.kind != StreamMessage::Kind::kChunk || decoded.chunk_offset != received_ ||
        decoded.chunk_size > total_ - received_) {
      return absl::DataLossError(absl::StrCat("node ", source_.node, " sent a chunk of '",
                                              source_.name, "' at ", decoded.chunk_offset,
                                              " where ", received_, " was next"));
    }
    return Write(decoded.chunk_pieces, decoded.chunk_size);
  }

  // Writes pieces at received_, summing them while they are hot.
  template <typename Pieces>
  absl::Status Write(const Pieces& pieces, uint64_t size) {
    TENSORD_RETURN_IF_ERROR(pending_->buffer->Write(received_, pieces));
    for (std::span<const uint8_t> piece : pieces)
      crc_ = Crc32cExtend(crc_, piece.data(), piece.size());
    received_ += size;
    return absl::OkStatus();
  }

  Registry& registry_;
  const PullSource& source_;
  const Retention retention_;
  ByteBufferDecoder decoder_;
  std::optional<PendingVersion> pending_;
  uint64_t total_ = 0;
  uint64_t received_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace

absl::Duration PullTimeout(uint64_t bytes) {
  // 10 s plus 20 s per GiB: 50 MB/s, far below any link a cluster runs on.
  return absl::Seconds(10) + absl::Seconds(20) * (static_cast<double>(bytes) / (1 << 30));
}

absl::StatusOr<PendingVersion> PullVersion(PeerChannels& peers, Registry& registry,
                                           const PullSource& source, Retention retention) {
  std::shared_ptr<grpc::Channel> channel = peers.ChannelTo(source.address);
  const grpc::internal::RpcMethod method(kFetchMethod, grpc::internal::RpcMethod::SERVER_STREAMING,
                                         channel);
  grpc::ClientContext context;
  peers.Prepare(context, PullTimeout(source.total_bytes));
  v1::FetchRequest request;
  request.set_name(source.name);
  request.set_version(source.version);
  request.set_cluster_origin(source.origin);
  std::unique_ptr<PeerChannels::StallGuard> stall = peers.GuardStall(context);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel.get(), method, &context, SerializeToByteBuffer(request)));
  PullReceiver receiver(registry, source, retention);
  grpc::ByteBuffer message;
  absl::Status failure;
  while (failure.ok() && !receiver.complete() && reader->Read(&message)) {
    stall->Moved();
    failure = receiver.Receive(message);
  }
  if (!failure.ok() || !receiver.complete()) context.TryCancel();
  const grpc::Status finished = reader->Finish();
  TENSORD_RETURN_IF_ERROR(failure);
  if (stall->stalled()) {
    return absl::UnavailableError(absl::StrCat(
        "node ", source.node, " at ", source.address, " stopped answering the copy of '",
        source.name, "' for ", absl::FormatDuration(peers.options().stall_timeout)));
  }
  if (!finished.ok() && !receiver.complete()) {
    const absl::Status status = FromGrpcStatus(finished);
    return absl::Status(status.code(), absl::StrCat("node ", source.node, " at ", source.address,
                                                    ": ", status.message()));
  }
  return receiver.Finish();
}

}  // namespace tensord
