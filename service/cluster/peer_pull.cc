#include "service/cluster/peer_pull.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/fetch_receiver.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/status_conversion.h"
#include "tensord/v1/tensor_service.pb.h"

namespace tensord {
namespace {

constexpr char kFetchMethod[] = "/tensord.v1.TensorService/Fetch";

// Where a pulled Fetch answer goes: a new registry buffer, opened only for
// the version the cluster recorded (size and CRC-32C, and the holder's
// version number for a cache name); FetchReceiver checks the rest and sums
// the bytes against the CRC-32C, which Open made the recorded one.
class PullSink final : public FetchReceiver::Sink {
 public:
  PullSink(Registry& registry, const PullSource& source, Retention retention,
           FillingVersion* filling)
      : registry_(registry), source_(source), retention_(retention), filling_(filling) {}

  absl::Status Open(WireFetchHeader& header) override {
    const WireTensorInfo& info = header.info;
    // What the cluster recorded is what must arrive; a holder answering
    // with something else (another size, other bytes) is not trusted.
    if (info.total_bytes != source_.total_bytes || info.crc32c != source_.crc32c) {
      return absl::DataLossError(absl::StrCat("node ", source_.node, " offered '", source_.name,
                                              "' as ", info.total_bytes, " bytes with CRC-32C ",
                                              info.crc32c, "; the cluster recorded ",
                                              source_.total_bytes, " bytes with ", source_.crc32c));
    }
    if (header.split || header.range_offset != 0 || header.range_length != info.total_bytes ||
        (source_.version != 0 && info.version != source_.version)) {
      return absl::DataLossError(absl::StrCat("node ", source_.node, " answered the copy of '",
                                              source_.name, "' with another version or range"));
    }
    TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout layout,
                             LayoutFromWire(std::move(header.info.layout)));
    // Kept here as host bytes: this node may have no device, and a reader
    // through it asked for the bytes, not for a place.
    layout.device = DLDevice{kDLCPU, 0};
    const dlpack::TensorLayout announced_layout = layout;
    // A copy passed on as it arrives gets a memfd of its own: a spare could
    // be taken by another put while chunks of an abandoned attempt still
    // wait to be sent from it.
    const bool passed_on =
        filling_ != nullptr && source_.total_bytes > FillingVersion::kPassedOnAboveBytes;
    TENSORD_ASSIGN_OR_RETURN(
        PendingVersion prepared,
        registry_.Prepare(source_.name, std::move(layout), source_.total_bytes, retention_,
                          passed_on ? HostPlacement::kOwnMemfd : HostPlacement::kAuto));
    pending_ = std::move(prepared);
    // This node's copy is created now (or when the first attempt began):
    // what readers passed it while it arrives were told.
    const TensorVersion* announced = filling_ == nullptr ? nullptr : filling_->Look().announced;
    pending_->created_at = announced != nullptr ? announced->created : absl::Now();
    if (filling_ == nullptr) return absl::OkStatus();
    VersionDescription description;
    description.name = source_.name;
    description.layout = announced_layout;
    description.total_bytes = source_.total_bytes;
    description.crc32c = source_.crc32c;
    description.created = *pending_->created_at;
    description.retention = retention_;
    return filling_->Begin(description, *pending_->buffer);
  }

  absl::Status Write(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                     uint64_t size) override {
    TENSORD_RETURN_IF_ERROR(pending_->buffer->Write(offset, pieces));
    if (filling_ != nullptr) filling_->Advance(offset + size);
    return absl::OkStatus();
  }

  // After the receiver's Finish said OK: the version, its CRC-32C set.
  PendingVersion Take() && {
    pending_->crc32c = source_.crc32c;
    return *std::move(pending_);
  }

 private:
  Registry& registry_;
  const PullSource& source_;
  const Retention retention_;
  FillingVersion* const filling_;
  std::optional<PendingVersion> pending_;
};

}  // namespace

absl::Duration PullTimeout(uint64_t bytes) {
  // 10 s plus 20 s per GiB: 50 MB/s, far below any link a cluster runs on.
  return absl::Seconds(10) + absl::Seconds(20) * (static_cast<double>(bytes) / (1 << 30));
}

absl::StatusOr<PendingVersion> PullVersion(PeerChannels& peers, Registry& registry,
                                           const PullSource& source, Retention retention,
                                           FillingVersion* filling) {
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
  PullSink sink(registry, source, retention, filling);
  const std::string noun = absl::StrCat("node ", source.node, "'s copy of");
  // Every byte is summed: the holder's bytes are checked, not trusted.
  const FetchReceiver::Options receive{.verify_crc32c = true,
                                       .violation = absl::StatusCode::kDataLoss};
  FetchReceiver receiver(receive, sink, noun, source.name);
  ByteBufferDecoder decoder;
  grpc::ByteBuffer message;
  absl::Status failure;
  while (failure.ok() && !receiver.complete() && reader->Read(&message)) {
    stall->Moved();
    // The header's inline bytes are viewed in place, not copied out.
    failure = decoder.Decode(message, HeaderInlineData::kLift);
    if (failure.ok()) failure = receiver.Receive(decoder.message());
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
  TENSORD_RETURN_IF_ERROR(receiver.Finish());
  return std::move(sink).Take();
}

}  // namespace tensord
