// Remote put: header, then chunks copied from the received slices straight
// into the new version's memfd (the one copy), then publish on half-close.
// A part of a put in several streams (PutHeader.part) writes its range into
// the put it joins (parted_puts.h) and, once its bytes are in, waits for
// the put's outcome.
// A device tensor's chunks go through pinned staging to the device instead
// (device_staging.h), all copies finishing before publish.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "service/common/crc32c.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/transport/call_record.h"
#include "service/transport/device_staging.h"
#include "service/transport/parted_puts.h"
#include "service/transport/publish.h"
#include "service/transport/request_validation.h"
#include "service/transport/tensor_service.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

// A put this large has grown gRPC's receive buffers: it counts as a transfer
// after which the freed heap goes back (IdleHeapTrim).
constexpr uint64_t kTrimAfterBytes = uint64_t{1} << 20;

class PutReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  // `part_call`: a PutPart call, whose header must name its part.
  PutReactor(grpc::CallbackServerContext* context, grpc::ByteBuffer* response, Registry& registry,
             const ServerOptions& options, ServiceMetrics& metrics, TensorService& service,
             bool part_call)
      : part_call_(part_call),
        context_(context),
        response_(response),
        registry_(registry),
        options_(options),
        metrics_(metrics),
        service_(service),
        call_(Rpc::kPut, *context, metrics, CallRecord::IdEcho::kAtStart) {
    if (absl::Status status = Admit(service); !status.ok()) {
      FinishWith(status);
      return;
    }
    // A part's client waits for this before sending its bytes (so that a
    // server without PutPart is known before any byte is queued).
    if (part_call_) StartSendInitialMetadata();
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (stream_slot_ != nullptr) stream_slot_->Touch();
    if (!ok && parted_ != nullptr) {
      PartArrived();
      return;
    }
    if (!ok) {
      EndOfStream();
      return;
    }
    if (absl::Status status = HandleMessage(); !status.ok()) {
      FinishWith(status);
      return;
    }
    StartRead(&request_);
  }

  // A part whose bytes are in waits without a read outstanding; only this
  // tells it that its client gave up (the put then fails).
  void OnCancel() override {
    cancelled_.store(true);
    if (!waiting_.load()) return;
    parted_->Fail(absl::CancelledError(
        absl::StrCat("part at offset ", part_offset_, " was cancelled by its client")));
  }

  void OnDone() override {
    metrics_.AddRemoteBytesReceived(received_);
    call_.End(outcome_);
    delete this;
  }

 private:
  // Token first, then a place among the open streams, before any byte.
  absl::Status Admit(TensorService& service) {
    TENSORD_ASSIGN_OR_RETURN(grant_, service.AdmitCall(context_, part_call_ ? "PutPart" : "Put"));
    TENSORD_ASSIGN_OR_RETURN(stream_slot_, service.streams().Admit("Put", [this] {
      // Sequentially consistent with PartArrived's store of waiting_ and load
      // of idle_cancelled_: one of the two sides sees the other.
      idle_cancelled_.store(true);
      if (waiting_.load()) {
        // A part waiting for the others: the put fails, and every part's
        // call answers why (a cancelled call could not).
        parted_->Fail(absl::DeadlineExceededError(
            absl::StrCat("part at offset ", part_offset_,
                         " waited longer than the stream idle timeout for "
                         "the other parts to move")));
        return;
      }
      context_->TryCancel();
    }));
    return absl::OkStatus();
  }

  absl::Status HandleMessage() {
    TENSORD_RETURN_IF_ERROR(decoder_.Decode(request_));
    const StreamMessage& message = decoder_.message();
    switch (message.kind) {
      case StreamMessage::Kind::kHeader: return StartVersion(message.header);
      case StreamMessage::Kind::kChunk: return CopyChunk(message);
      case StreamMessage::Kind::kEmpty: break;
    }
    return absl::InvalidArgumentError("put message carries neither a header nor a chunk");
  }

  absl::Status StartVersion(const std::string& header_bytes) {
    if (started_) {
      return absl::InvalidArgumentError(
          absl::StrCat("put of '", pending_.name, "' sent a second header"));
    }
    v1::PutHeader header;
    if (!header.ParseFromString(header_bytes)) {
      return absl::InvalidArgumentError("put header is not a valid tensord.v1.PutHeader");
    }
    TENSORD_ASSIGN_OR_RETURN(ValidatedPut put,
                             ValidatePutHeader(header, options_.max_tensor_bytes));
    name_ = put.name;
    TENSORD_RETURN_IF_ERROR(TensorService::CheckName(grant_, "Put", put.name));
    if (put.part.has_value() != part_call_) {
      return absl::InvalidArgumentError(
          part_call_ ? absl::StrCat("PutPart of '", put.name, "' has no PutHeader.part")
                     : absl::StrCat("put of '", put.name,
                                    "' names a part (PutHeader.part): parts go to PutPart"));
    }
    if (part_call_) return JoinParts(header, put);
    TENSORD_ASSIGN_OR_RETURN(replicas_, CopiesFor(put, header.replicas()));
    TENSORD_ASSIGN_OR_RETURN(pending_, registry_.Prepare(std::move(put.name), std::move(put.layout),
                                                         put.total_bytes, put.retention));
    started_ = true;
    if (pending_.device_memory != nullptr) {
      DeviceBackend* backend = registry_.device_backend();
      TENSORD_ASSIGN_OR_RETURN(
          upload_,
          DeviceUpload::Create(*backend, *pending_.device_memory,
                               std::min<uint64_t>(options_.chunk_bytes, pending_.total_bytes)));
    }
    expected_crc32c_ = put.crc32c;
    return absl::OkStatus();
  }

  // The first part of a put in parts reserves its version (as a put in one
  // stream does); the others join it.
  // The copies a put gets, checked before any byte moves.
  absl::StatusOr<uint32_t> CopiesFor(const ValidatedPut& put, uint32_t requested) const {
    if (options_.cluster_access != nullptr) {
      return options_.cluster_access->ReplicasFor(put.name, requested, put.retention);
    }
    if (requested > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "put of '", put.name, "' asks for replicas=", requested,
          ", but this server is a single node (start it with --etcd-endpoints to form a cluster)"));
    }
    return 1u;
  }

  absl::Status JoinParts(const v1::PutHeader& header, const ValidatedPut& put) {
    // Resolved by every part; the put keeps its first part's.
    TENSORD_ASSIGN_OR_RETURN(const uint32_t replicas, CopiesFor(put, header.replicas()));
    TENSORD_ASSIGN_OR_RETURN(
        parted_, service_.parted_puts().Join(
                     put, header.replicas(), grant_, [&]() -> absl::StatusOr<PartedPuts::Prepared> {
                       PartedPuts::Prepared prepared;
                       prepared.replicas = replicas;
                       TENSORD_ASSIGN_OR_RETURN(
                           prepared.pending,
                           registry_.Prepare(put.name, put.layout, put.total_bytes, put.retention));
                       return prepared;
                     }));
    started_ = true;
    part_offset_ = put.part->offset;
    part_length_ = put.part->length;
    return absl::OkStatus();
  }

  absl::Status CopyPartChunk(const StreamMessage& chunk) {
    TENSORD_RETURN_IF_ERROR(parted_->failure());
    if (chunk.chunk_offset != part_offset_ + received_) {
      return absl::InvalidArgumentError(
          absl::StrCat("part [", part_offset_, ", +", part_length_, ") of the put of '", name_,
                       "' sent a chunk at offset ", chunk.chunk_offset, " but ", received_,
                       " of its bytes have arrived; chunks must be contiguous and in order"));
    }
    if (chunk.chunk_size > part_length_ - received_) {
      return absl::InvalidArgumentError(absl::StrCat("part [", part_offset_, ", +", part_length_,
                                                     ") of the put of '", name_, "' sent a chunk [",
                                                     chunk.chunk_offset, ", +", chunk.chunk_size,
                                                     ") beyond the part's end"));
    }
    for (std::span<const uint8_t> piece : chunk.chunk_pieces) {
      crc32c_ = Crc32cExtend(crc32c_, piece.data(), piece.size());
    }
    TENSORD_RETURN_IF_ERROR(parted_->bytes().Write(chunk.chunk_offset, chunk.chunk_pieces));
    received_ += chunk.chunk_size;
    NoteLargeTransfer();
    parted_->Touch();
    return absl::OkStatus();
  }

  // Half-close of a part: its bytes are checked, then it waits for the
  // put's outcome (the last part to arrive publishes for all).
  void PartArrived() {
    // Stored before the cancel flags are read (all sequentially consistent):
    // a cancel now either is seen here or sees a waiting part and fails the put.
    waiting_.store(true);
    absl::Status ended = absl::OkStatus();
    if (idle_cancelled_.load()) {
      ended = absl::DeadlineExceededError(absl::StrCat(
          "part at offset ", part_offset_, " of the put of '", name_,
          "' sent nothing for longer than the stream idle timeout; cancelled, nothing was "
          "published"));
    } else if (cancelled_.load() || context_->IsCancelled()) {
      ended = absl::CancelledError("put cancelled by the client; nothing was published");
    } else if (received_ != part_length_) {
      ended = absl::InvalidArgumentError(
          absl::StrCat("part [", part_offset_, ", +", part_length_, ") of the put of '", name_,
                       "' ended after ", received_, " of its bytes; nothing was published"));
    }
    if (!ended.ok()) {
      FinishWith(ended);
      return;
    }
    parted_->Arrived(part_offset_, crc32c_, std::move(stream_slot_),
                     [this](const absl::StatusOr<VersionInfo>& outcome) {
                       if (outcome.ok()) {
                         published_version_ = outcome->version;
                         v1::PutResponse response;
                         InfoToProto(*outcome, response.mutable_info());
                         *response_ = SerializeToByteBuffer(response);
                       }
                       FinishWith(outcome.status());
                     });
  }

  absl::Status CopyChunk(const StreamMessage& chunk) {
    if (!started_) {
      return absl::InvalidArgumentError("put sent a chunk before its header");
    }
    if (parted_ != nullptr) return CopyPartChunk(chunk);
    if (chunk.chunk_offset != received_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "put of '", pending_.name, "' sent a chunk at offset ", chunk.chunk_offset, " but ",
          received_, " bytes have arrived; chunks must be contiguous and in order"));
    }
    if (chunk.chunk_size > pending_.total_bytes - received_) {
      return absl::InvalidArgumentError(
          absl::StrCat("put of '", pending_.name, "' sent a chunk [", chunk.chunk_offset, ", +",
                       chunk.chunk_size, ") beyond total_bytes ", pending_.total_bytes));
    }
    if (upload_ != nullptr) {
      for (std::span<const uint8_t> piece : chunk.chunk_pieces) {
        crc32c_ = Crc32cExtend(crc32c_, piece.data(), piece.size());
        TENSORD_RETURN_IF_ERROR(upload_->Append(piece));
      }
      received_ += chunk.chunk_size;
      NoteLargeTransfer();
      return absl::OkStatus();
    }
    // Checksummed while gRPC's just-received bytes are still in cache.
    for (std::span<const uint8_t> piece : chunk.chunk_pieces) {
      crc32c_ = Crc32cExtend(crc32c_, piece.data(), piece.size());
    }
    TENSORD_RETURN_IF_ERROR(pending_.buffer->Write(received_, chunk.chunk_pieces));
    received_ += chunk.chunk_size;
    NoteLargeTransfer();
    return absl::OkStatus();
  }

  // gRPC's receive buffers for a large put grow the heap by up to the
  // flow-control window times the streams; the server keeps freed heap for
  // the next transfer and hands it back once large puts stop.
  void NoteLargeTransfer() {
    if (heap_activity_ == nullptr && received_ >= kTrimAfterBytes) {
      heap_activity_ = std::make_unique<IdleHeapTrim::Activity>(service_.heap_trim());
    }
  }

  // The stream's checks, then the publish; the call finishes from its
  // outcome (inline, or on a cluster thread once the cluster has it).
  void EndOfStream() {
    if (absl::Status complete = CheckComplete(); !complete.ok()) {
      FinishWith(complete);
      return;
    }
    pending_.crc32c = crc32c_;
    // The place among the open streams goes now: a cluster commit is not
    // this stream idling.
    stream_slot_.reset();
    PublishLatest(registry_, options_.cluster_access.get(), std::move(pending_), expected_crc32c_,
                  replicas_, [this](absl::StatusOr<VersionInfo> info) {
                    if (info.ok()) {
                      published_version_ = info->version;
                      Log(LogLevel::kInfo, "put",
                          {{"name", info->name},
                           {"version", info->version},
                           {"bytes", info->total_bytes},
                           {"origin", info->origin},
                           {"request_id", call_.request_id()}});
                      v1::PutResponse response;
                      InfoToProto(*info, response.mutable_info());
                      *response_ = SerializeToByteBuffer(response);
                    }
                    FinishWith(info.status());
                  });
  }

  absl::Status CheckComplete() {
    if (idle_cancelled_.load(std::memory_order_relaxed)) {
      return absl::DeadlineExceededError(
          absl::StrCat("put of '", name_,
                       "' sent nothing for longer than the stream idle timeout; cancelled, "
                       "nothing was published"));
    }
    if (context_->IsCancelled()) {
      return absl::CancelledError("put cancelled by the client; nothing was published");
    }
    if (!started_) {
      return absl::InvalidArgumentError("put stream ended before a header");
    }
    if (received_ != pending_.total_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("put of '", pending_.name, "' ended after ",
                                                     received_, " of ", pending_.total_bytes,
                                                     " bytes; nothing was published"));
    }
    if (upload_ != nullptr) {
      // Published only once every byte is on the device.
      TENSORD_RETURN_IF_ERROR(upload_->Finish());
      upload_.reset();
    }
    return absl::OkStatus();
  }

  void FinishWith(const absl::Status& status) {
    outcome_ = status;
    if (!status.ok()) {
      Log(LogLevel::kInfo, "put_failed",
          {{"name", name_},
           {"peer", context_->peer()},
           {"request_id", call_.request_id()},
           {"code", absl::StatusCodeToString(status.code())},
           {"message", status.message()}});
      // Free the partial bytes and their reservation now, not at OnDone;
      // the upload first, as it waits for copies into those bytes.
      upload_.reset();
      pending_ = PendingVersion();
      // A put in parts fails whole (no effect once every part is in); its
      // bytes go when its last part's call is done.
      if (parted_ != nullptr) parted_->Fail(status);
    }
    // The place among the open streams goes back now that this side is
    // done, not at OnDone: gRPC runs OnDone after the client has its answer,
    // and a client putting in a loop would otherwise find places still held
    // by its own finished puts (seen at the 256 cap under TSan).
    stream_slot_.reset();
    Finish(ToGrpcStatus(status));
  }

  const bool part_call_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  Registry& registry_;
  const ServerOptions& options_;
  ServiceMetrics& metrics_;
  TensorService& service_;
  CallRecord call_;
  absl::Status outcome_;  // what the call finished with, recorded at OnDone
  grpc::ByteBuffer request_;
  ByteBufferDecoder decoder_;
  std::string name_;  // for logs; pending_ is moved out by Publish
  PendingVersion pending_;
  bool started_ = false;  // a header was accepted
  // Device tensors only; declared after pending_ so it is destroyed first.
  std::unique_ptr<DeviceUpload> upload_;
  std::optional<uint32_t> expected_crc32c_;
  uint64_t received_ = 0;  // of the whole put, or of this part
  uint32_t crc32c_ = 0;
  // A part of a put in several streams: the put it joined and its range.
  std::shared_ptr<PartedPut> parted_;
  uint64_t part_offset_ = 0;
  uint64_t part_length_ = 0;
  std::atomic<bool> waiting_{false};    // its bytes are in; it waits for the outcome
  std::atomic<bool> cancelled_{false};  // OnCancel ran
  std::unique_ptr<IdleHeapTrim::Activity> heap_activity_;  // once past kTrimAfterBytes
  uint32_t replicas_ = 1;  // copies the ack waits for (cluster only)
  uint64_t published_version_ = 0;
  const TokenGrant* grant_ = nullptr;  // null when auth is off
  std::atomic<bool> idle_cancelled_{false};
  // Last: its destructor waits out a watchdog cancel that may still touch
  // the members above.
  std::unique_ptr<ActiveStreams::Slot> stream_slot_;
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* TensorService::Put(grpc::CallbackServerContext* context,
                                                              grpc::ByteBuffer* response) {
  return new PutReactor(context, response, registry_, options_, metrics_, *this,
                        /*part_call=*/false);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* TensorService::PutPart(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new PutReactor(context, response, registry_, options_, metrics_, *this,
                        /*part_call=*/true);
}

}  // namespace tensord
