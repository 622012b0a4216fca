// Remote fetch: a header, then chunks whose data slices point into the
// version's sealed memory. The lease is held until gRPC releases the last
// slice, which may be after the call finished.
// A device tensor's chunks are copied device-to-host into pinned staging
// (the copy of chunk k+1 runs while chunk k is sent) and from there into a
// slice of their own: gRPC may hold a slice after the write completed, and
// the staging buffer is reused at once.
#include <grpcpp/alarm.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/registry/filling_version.h"
#include "service/transport/call_record.h"
#include "service/transport/device_staging.h"
#include "service/transport/latest_read.h"
#include "service/transport/payload_hold.h"
#include "service/transport/request_validation.h"
#include "service/transport/tensor_info_wire.h"
#include "service/transport/tensor_service.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/status_conversion.h"
#include "service/wire/wire_tensor_info.h"

namespace tensord {
namespace {

// Ranges up to this size travel inside the fetch header.
constexpr uint64_t kMaxInlineFetchBytes = 32 * 1024;

// The bytes of [offset, offset + size) of the held version, for a header's
// inline data: a host version's bytes in place, the slice holding a
// reference on `hold` until gRPC lets go of it (a copy cost 400
// instructions per 4 KiB fetch, ten times that at 32 KiB); a device
// version's copied to the host.
absl::StatusOr<grpc::Slice> InlineBytes(PayloadHold& hold, DeviceBackend* backend, uint64_t offset,
                                        uint64_t size) {
  const TensorVersion& version = hold.version();
  if (size == 0) return grpc::Slice();
  if (version.device_memory == nullptr) {
    hold.Ref();  // dropped by gRPC through UnrefCallback
    // gRPC only reads a slice it sends; its constructor wants a mutable pointer.
    return grpc::Slice(const_cast<uint8_t*>(version.buffer->data() + offset), size,
                       &PayloadHold::UnrefCallback, &hold);
  }
  grpc::Slice bytes(size);
  TENSORD_RETURN_IF_ERROR(backend->CopyDeviceToHost(const_cast<uint8_t*>(bytes.begin()),
                                                    *version.device_memory, offset, size, nullptr));
  return bytes;
}

// gRPC's release of a chunk sent from a copy still arriving: drops the
// chunk's hold on the copy's mapping.
void ReleaseBorrowed(void* hold) { delete static_cast<std::shared_ptr<const void>*>(hold); }

// Whether a header for `length` bytes carries them (a split one carries none).
bool Inlines(bool split, uint64_t length) { return !split && length <= kMaxInlineFetchBytes; }

// The header a Fetch stream of `version` starts with (and FetchInline's
// answer), into `out`: the range [offset, offset + length), split (no
// bytes) when `split`, else carrying the bytes when Inlines() says so.
// Filled in place: grpc::ByteBuffer has no move, so returning one in a
// StatusOr copied it twice (measured: 750 instructions per small fetch).
absl::Status EncodeFetchHeader(PayloadHold& hold, DeviceBackend* backend, uint64_t offset,
                               uint64_t length, bool split, grpc::ByteBuffer& out) {
  const FetchHeaderWire header(hold.version(), offset, length, split);
  auto write_header = [&header](uint8_t* at) { header.Write(at); };
  if (!Inlines(split, length)) {
    grpc::ByteBuffer encoded = MakeHeaderBuffer(header.size(), write_header);
    out.Swap(&encoded);
    return absl::OkStatus();
  }
  // One message instead of two: a small copy beats a second write.
  TENSORD_ASSIGN_OR_RETURN(grpc::Slice bytes, InlineBytes(hold, backend, offset, length));
  grpc::ByteBuffer encoded = MakeInlineHeaderBuffer(header.size(), write_header, std::move(bytes));
  out.Swap(&encoded);
  return absl::OkStatus();
}

// FetchInline's answer for `request`: the bytes inline when the range is
// small enough, else a split header. Returns the bytes it carries.
absl::StatusOr<uint64_t> AnswerInline(Registry& registry, Lease lease,
                                      const WireFetchRequest& request,
                                      std::atomic<int64_t>& live_payloads,
                                      grpc::ByteBuffer& response) {
  TENSORD_ASSIGN_OR_RETURN(ByteSpan range, ResolveFetchRange(request, lease->total_bytes));
  const bool split = range.length > kMaxInlineFetchBytes;
  // Lives on in the answer's data slice, if it has one.
  auto* hold = new PayloadHold(std::move(lease), live_payloads);
  const absl::Status encoded = EncodeFetchHeader(*hold, registry.device_backend(), range.offset,
                                                 range.length, split, response);
  hold->Unref();
  TENSORD_RETURN_IF_ERROR(encoded);
  return split ? 0 : range.length;
}

// FetchInline's answer for a copy still arriving from another node: a
// split header naming version 0 (never inline: the bytes are not all here).
absl::Status AnswerNotNumberedYet(const TensorVersion& announced, const WireFetchRequest& request,
                                  grpc::ByteBuffer& response) {
  TENSORD_ASSIGN_OR_RETURN(ByteSpan range, ResolveFetchRange(request, announced.total_bytes));
  const FetchHeaderWire header(announced, range.offset, range.length, /*split=*/true);
  grpc::ByteBuffer encoded =
      MakeHeaderBuffer(header.size(), [&header](uint8_t* at) { header.Write(at); });
  response.Swap(&encoded);
  return absl::OkStatus();
}

// Calls `ready` once the copy is announced, whole or failed: now, or on
// the thread that made it so.
template <typename Ready>
void WhenAnnounced(std::shared_ptr<FillingVersion> filling, Ready ready) {
  const FillingVersion::View view = filling->Look();
  if (view.announced != nullptr || view.complete != nullptr || view.failed.has_value()) {
    ready(view);
    return;
  }
  FillingVersion* const waited = filling.get();
  FillingVersion::Wake wake = [filling = std::move(filling), ready = std::move(ready)]() mutable {
    WhenAnnounced(std::move(filling), std::move(ready));
  };
  // A change since the look: look again.
  if (!waited->WaitPast(view.changes, wake)) std::move(wake)();
}

class FetchReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  FetchReactor(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
               Registry& registry, const ServerOptions& options,
               std::atomic<int64_t>& live_payloads, ServiceMetrics& metrics, TensorService& service)
      : context_(context),
        registry_(registry),
        options_(options),
        live_payloads_(live_payloads),
        metrics_(metrics),
        call_(Rpc::kFetch, *context, metrics, CallRecord::IdEcho::kAtStart) {
    absl::Status status = Admit(*request, service);
    if (!status.ok()) {
      Serve(status);
      return;
    }
    // Another node's copy of an ordered version: served from this node's
    // own registry, never through the cluster's read path.
    const bool peer_copy = request_.cluster_origin() != 0;
    SourceForRead(registry, peer_copy ? nullptr : options.cluster_access.get(), request_.name(),
                  request_.version(), [this](absl::StatusOr<LatestSource> source) {
                    if (!source.ok()) {
                      Serve(source.status());
                    } else if (source->filling != nullptr) {
                      filling_ = std::move(source->filling);
                      PumpFilling();
                    } else {
                      Serve(Start(std::move(source->lease)));
                    }
                  });
  }

  void OnWriteDone(bool ok) override {
    if (stream_slot_ != nullptr) stream_slot_->Touch();
    if (finished_) return;
    if (!ok) {
      // The client went away or the deadline passed; the lease goes with OnDone.
      finished_ = true;
      outcome_ = absl::CancelledError("fetch stream broken");
      Finish(ToGrpcStatus(outcome_));
      return;
    }
    WriteNextChunk();
  }

  void OnDone() override {
    metrics_.AddRemoteBytesSent(next_offset_ - start_offset_);
    call_.End(outcome_);
    download_.reset();  // waits for its copies out of the leased bytes
    if (hold_ != nullptr) hold_->Unref();
    delete this;
  }

 private:
  // Sends the version Start() leased, or finishes with why not.
  void Serve(absl::Status status) {
    if (!status.ok()) {
      outcome_ = status;
      Finish(ToGrpcStatus(status));
      return;
    }
    WriteHeader();
  }

  absl::Status Admit(const grpc::ByteBuffer& request_bytes, TensorService& service) {
    // Parsed before the token is checked only to name the tensor in a
    // refusal; an unauthenticated caller still hears UNAUTHENTICATED first.
    const absl::Status parsed = ParseFromByteBuffer(request_bytes, request_, "fetch request");
    // A copy between nodes needs the node's identity, not a reader's.
    const char* rpc = parsed.ok() && request_.cluster_origin() != 0 ? "Fetch(cluster)" : "Fetch";
    TENSORD_ASSIGN_OR_RETURN(const TokenGrant* grant,
                             service.AdmitCall(context_, rpc, parsed.ok() ? request_.name() : ""));
    TENSORD_RETURN_IF_ERROR(parsed);
    TENSORD_RETURN_IF_ERROR(TensorService::CheckName(grant, "Fetch", request_.name()));
    if (request_.cluster_origin() != 0 && request_.version() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a fetch of '", request_.name(), "' by cluster_origin ", request_.cluster_origin(),
          " names no version number too (it got ", request_.version(), ")"));
    }
    // A stalled reader is cancelled after the idle timeout, which ends the
    // stream and, once gRPC drops the queued slices, the lease.
    TENSORD_ASSIGN_OR_RETURN(stream_slot_,
                             service.streams().Admit("Fetch", [this] { context_->TryCancel(); }));
    return absl::OkStatus();
  }

  // Prepares the stream of the leased version.
  absl::Status Start(Lease lease) {
    Registry& registry = registry_;
    const ServerOptions& options = options_;
    if (const int64_t wanted = request_.cluster_origin(); wanted != 0) {
      const int64_t held = lease->origin.load(std::memory_order_relaxed);
      if (held != wanted) {
        return absl::NotFoundError(absl::StrCat("this node's copy of '", request_.name(),
                                                "' has cluster version ", held, ", not ", wanted));
      }
    }
    TENSORD_ASSIGN_OR_RETURN(ByteSpan range, ResolveFetchRange(request_, lease->total_bytes));
    start_offset_ = range.offset;
    next_offset_ = range.offset;
    queued_offset_ = range.offset;
    end_offset_ = range.offset + range.length;
    device_backend_ = registry.device_backend();
    chunk_bytes_ = options.chunk_bytes;
    if (request_.max_chunk_bytes() != 0) {
      chunk_bytes_ = std::min(chunk_bytes_, request_.max_chunk_bytes());
    }
    hold_ = new PayloadHold(std::move(lease), live_payloads_);
    // A client that fetches large ranges in parallel asked for the header only.
    split_ = request_.split_above_bytes() != 0 && range.length > request_.split_above_bytes();
    if (split_) return absl::OkStatus();
    const TensorVersion& version = hold_->version();
    if (version.device_memory != nullptr && range.length > kMaxInlineFetchBytes) {
      TENSORD_ASSIGN_OR_RETURN(
          download_, DeviceDownload::Create(*registry.device_backend(), *version.device_memory,
                                            std::min<uint64_t>(chunk_bytes_, range.length)));
      TENSORD_RETURN_IF_ERROR(QueueNextDeviceChunk());
    }
    return absl::OkStatus();
  }

  // Starts the device-to-host copy of the next chunk not yet queued.
  absl::Status QueueNextDeviceChunk() {
    const uint64_t size =
        std::min<uint64_t>(download_->staging_bytes(), end_offset_ - queued_offset_);
    TENSORD_RETURN_IF_ERROR(download_->Queue(queued_offset_, size));
    queued_offset_ += size;
    return absl::OkStatus();
  }

  void WriteHeader() {
    const uint64_t length = end_offset_ - next_offset_;
    if (absl::Status encoded =
            EncodeFetchHeader(*hold_, device_backend_, next_offset_, length, split_, message_);
        !encoded.ok()) {
      FailStream(encoded);
      return;
    }
    if (split_) {
      next_offset_ = end_offset_;  // nothing follows; OnDone counts no bytes sent
      start_offset_ = end_offset_;
    } else if (Inlines(split_, length)) {
      next_offset_ = end_offset_;
    }
    Write();
  }

  // A copy arriving from another node, passed on as it arrives: the
  // header once the copy is announced, then each chunk once the copy has
  // it. The range's last byte waits for the sealed version, whose number
  // goes in the trailing metadata (the header named version 0: not
  // numbered yet); the rest is sent from that version. One call at a time:
  // it waits for the copy only with no write outstanding.
  void PumpFilling() {
    for (;;) {
      FillingVersion::View view = filling_->Look();
      if (view.failed.has_value()) {
        FailStream(*view.failed);
        return;
      }
      if (view.complete != nullptr) {
        ServeCompleted(std::move(view.complete), view.abandoned_bytes_differed);
        return;
      }
      if (view.announced != nullptr && !header_sent_) {
        absl::StatusOr<bool> sent = WriteFillingHeader(*view.announced);
        if (!sent.ok()) {
          FailStream(sent.status());
          return;
        }
        if (*sent) return;
      } else if (view.announced != nullptr && WriteFillingChunk(view.readable)) {
        return;
      }
      FillingVersion::Wake wake = [this] { ResumeFilling(); };
      if (filling_->WaitPast(view.changes, wake)) return;
    }
  }

  // Woken on the pull's thread: the sends go on on one of gRPC's, as a
  // write started here would be made here, holding up the pull.
  void ResumeFilling() {
    // Waiting on the copy is progress, not an idle reader.
    if (stream_slot_ != nullptr) stream_slot_->Touch();
    resume_ = std::make_unique<grpc::Alarm>();
    resume_->Set(gpr_now(GPR_CLOCK_MONOTONIC), [this](bool) { PumpFilling(); });
  }

  // The header of the announced copy; false (nothing sent) for an empty
  // range, which waits for the version's number.
  absl::StatusOr<bool> WriteFillingHeader(const TensorVersion& announced) {
    TENSORD_ASSIGN_OR_RETURN(ByteSpan range, ResolveFetchRange(request_, announced.total_bytes));
    if (range.length == 0) return false;
    start_offset_ = range.offset;
    next_offset_ = range.offset;
    end_offset_ = range.offset + range.length;
    chunk_bytes_ = options_.chunk_bytes;
    if (request_.max_chunk_bytes() != 0) {
      chunk_bytes_ = std::min(chunk_bytes_, request_.max_chunk_bytes());
    }
    // Never split: the parts would name a version number not given yet.
    const FetchHeaderWire header(announced, range.offset, range.length, /*split=*/false);
    message_ = MakeHeaderBuffer(header.size(), [&header](uint8_t* at) { header.Write(at); });
    header_sent_ = true;
    StartWrite(&message_);
    return true;
  }

  // The next chunk below `readable` (never the range's last byte), sent
  // from the copy's mapping; false when there is none yet.
  bool WriteFillingChunk(uint64_t readable) {
    const uint64_t end = std::min(readable, end_offset_ - 1);
    if (end <= next_offset_) return false;
    const uint64_t size = std::min<uint64_t>(chunk_bytes_, end - next_offset_);
    std::optional<FillingVersion::Borrowed> bytes = filling_->Borrow(next_offset_, size);
    if (!bytes.has_value()) return false;
    // Dropped by gRPC through ReleaseBorrowed.
    auto* hold = new std::shared_ptr<const void>(std::move(bytes->hold));
    message_ = MakeChunkBuffer(next_offset_, bytes->data, size, &ReleaseBorrowed, hold);
    next_offset_ += size;
    StartWrite(&message_);
    return true;
  }

  // The copy is sealed and numbered: the rest is sent from it, as any
  // version is (from the start when nothing was sent yet). Unless bytes
  // sent may have come from an abandoned attempt that the checked copy
  // does not match: then the stream fails rather than end OK with them.
  void ServeCompleted(std::shared_ptr<const TensorVersion> version, bool abandoned_bytes_differed) {
    filling_.reset();
    if (!header_sent_) {
      Serve(Start(Lease(std::move(version))));
      return;
    }
    if (abandoned_bytes_differed && next_offset_ > start_offset_) {
      FailStream(
          absl::DataLossError(absl::StrCat("bytes of '", request_.name(),
                                           "' passed on from a holder that failed mid-copy differ "
                                           "from the copy that checked out; fetch it again")));
      return;
    }
    context_->AddTrailingMetadata(kNumberedVersionTrailer, absl::StrCat(version->version));
    hold_ = new PayloadHold(Lease(std::move(version)), live_payloads_);
    WriteNextChunk();
  }

  void WriteNextChunk() {
    if (filling_ != nullptr) {
      PumpFilling();
      return;
    }
    if (download_ != nullptr) {
      WriteNextDeviceChunk();
      return;
    }
    const TensorVersion& version = hold_->version();
    const uint64_t size = std::min<uint64_t>(chunk_bytes_, end_offset_ - next_offset_);
    hold_->Ref();  // dropped by gRPC through UnrefCallback
    message_ = MakeChunkBuffer(next_offset_, version.buffer->data() + next_offset_, size,
                               &PayloadHold::UnrefCallback, hold_);
    next_offset_ += size;
    Write();
  }

  void WriteNextDeviceChunk() {
    absl::StatusOr<std::span<const uint8_t>> staged = download_->Take();
    if (!staged.ok()) {
      FailStream(staged.status());
      return;
    }
    message_ = MakeCopiedChunkBuffer(next_offset_, *staged);
    next_offset_ += staged->size();
    // Overlaps the next copy with sending this chunk.
    if (queued_offset_ < end_offset_) {
      if (absl::Status queued = QueueNextDeviceChunk(); !queued.ok()) {
        FailStream(queued);
        return;
      }
    }
    Write();
  }

  void FailStream(const absl::Status& status) {
    finished_ = true;
    outcome_ = status;
    Finish(ToGrpcStatus(status));
  }

  // The last message carries the final status too, saving a round trip.
  void Write() {
    if (next_offset_ == end_offset_) {
      finished_ = true;
      StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&message_);
    }
  }

  grpc::CallbackServerContext* const context_;
  Registry& registry_;
  const ServerOptions& options_;
  std::atomic<int64_t>& live_payloads_;
  ServiceMetrics& metrics_;
  CallRecord call_;
  absl::Status outcome_;  // what the call finished with, recorded at OnDone
  v1::FetchRequest request_;
  PayloadHold* hold_ = nullptr;
  grpc::ByteBuffer message_;
  uint64_t start_offset_ = 0;
  uint64_t next_offset_ = 0;  // bytes before it are queued for sending
  uint64_t end_offset_ = 0;
  uint32_t chunk_bytes_ = 0;
  bool finished_ = false;
  bool split_ = false;  // header only: the client fetches the range in parts
  // A copy still arriving from another node, until it is sealed.
  std::shared_ptr<FillingVersion> filling_;
  bool header_sent_ = false;             // of the filling copy
  std::unique_ptr<grpc::Alarm> resume_;  // moves PumpFilling to gRPC's threads
  DeviceBackend* device_backend_ = nullptr;
  // Device tensors fetched in chunks only.
  std::unique_ptr<DeviceDownload> download_;
  uint64_t queued_offset_ = 0;  // device bytes before it are queued or taken
  std::unique_ptr<ActiveStreams::Slot> stream_slot_;
};

}  // namespace

grpc::ServerUnaryReactor* TensorService::FetchInline(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request_bytes,
                                                     grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // One allocation for what a pulled answer needs on another thread.
  struct InlineCall {
    InlineCall(grpc::CallbackServerContext& context, ServiceMetrics& metrics)
        : record(Rpc::kFetchInline, context, metrics) {}
    CallRecord record;
    grpc::Slice bytes;  // request.name views it
    WireFetchRequest request;
  };
  auto call = std::make_shared<InlineCall>(*context, metrics_);
  const WireFetchRequest& request = call->request;
  // Parsed before the token is checked only to name the tensor in a
  // refusal; an unauthenticated caller still hears UNAUTHENTICATED first.
  absl::Status parsed = FlattenByteBuffer(*request_bytes, call->bytes, "fetch request");
  if (parsed.ok() &&
      !ParseWireFetchRequest({call->bytes.begin(), call->bytes.size()}, call->request)) {
    parsed = absl::InvalidArgumentError("fetch request is not a valid tensord.v1.FetchRequest");
  }
  auto answer = [this, response, reactor, call](absl::StatusOr<Lease> lease) {
    absl::Status status = lease.status();
    if (lease.ok()) {
      absl::StatusOr<uint64_t> sent =
          AnswerInline(registry_, *std::move(lease), call->request, live_payloads_, *response);
      if (sent.ok()) metrics_.AddRemoteBytesSent(*sent);
      status = sent.status();
    }
    call->record.End(status);
    reactor->Finish(ToGrpcStatus(status));
  };
  // A copy still arriving from another node: a split header naming version
  // 0 once it is announced, so the client streams it as it arrives (its
  // Fetch stream joins the same copy); the version itself if it is whole.
  auto answer_filling = [response, reactor, call, answer](const FillingVersion::View& view) {
    if (view.complete != nullptr) {
      answer(Lease(view.complete));
      return;
    }
    absl::Status status = view.failed.value_or(absl::OkStatus());
    if (status.ok()) status = AnswerNotNumberedYet(*view.announced, call->request, *response);
    call->record.End(status);
    reactor->Finish(ToGrpcStatus(status));
  };
  // Refusals name Fetch: what the caller asked for (same permission).
  absl::StatusOr<const TokenGrant*> grant =
      AdmitCall(context, "Fetch", parsed.ok() ? request.name : "");
  absl::Status admitted = grant.status();
  if (admitted.ok()) admitted = parsed;
  if (admitted.ok()) admitted = CheckName(*grant, "Fetch", request.name);
  if (!admitted.ok()) {
    answer(admitted);
    return reactor;
  }
  if (request.cluster_origin != 0) {
    answer(absl::InvalidArgumentError(absl::StrCat("FetchInline of '", request.name,
                                                   "' with cluster_origin ", request.cluster_origin,
                                                   ": copies between nodes go through Fetch")));
    return reactor;
  }
  SourceForRead(registry_, options_.cluster_access.get(), request.name, request.version,
                [answer, answer_filling](absl::StatusOr<LatestSource> source) mutable {
                  if (!source.ok()) {
                    answer(source.status());
                  } else if (source->filling != nullptr) {
                    WhenAnnounced(std::move(source->filling), std::move(answer_filling));
                  } else {
                    answer(std::move(source->lease));
                  }
                });
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TensorService::Fetch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new FetchReactor(context, request, registry_, options_, live_payloads_, metrics_, *this);
}

}  // namespace tensord
