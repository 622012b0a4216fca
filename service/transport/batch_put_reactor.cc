// BatchPut: many items in one client stream. Small items arrive whole in
// BatchPutItems messages; others as a header and chunks, copied into their
// version's buffer as PutReactor does. Each item is checked, reserved and
// published (or, in an atomic batch, held for one group publish) exactly as
// a single Put; a bad item fails only itself, its bytes skipped.

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/crc32c.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/transport/call_record.h"
#include "service/transport/publish.h"
#include "service/transport/request_validation.h"
#include "service/transport/tensor_service.h"
#include "service/wire/batch_limits.h"
#include "service/wire/batch_put_answer.h"
#include "service/wire/batch_put_items.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

// A put this large has grown gRPC's receive buffers: it counts as a transfer
// after which the freed heap goes back (IdleHeapTrim).
constexpr uint64_t kTrimAfterBytes = uint64_t{1} << 20;
// Per-item status messages: each at most kMaxItemMessage bytes, and all of
// them together about kMessageBudget, so the answer for kBatchItemLimit
// items stays well inside a gRPC message of the default 8 MiB.
constexpr size_t kMaxItemMessage = 300;
constexpr size_t kMessageBudget = size_t{2} << 20;

class BatchPutReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  BatchPutReactor(grpc::CallbackServerContext* context, grpc::ByteBuffer* response,
                  Registry& registry, const ServerOptions& options, ServiceMetrics& metrics,
                  TensorService& service)
      : context_(context),
        response_(response),
        registry_(registry),
        options_(options),
        metrics_(metrics),
        call_(Rpc::kBatchPut, *context, metrics, CallRecord::IdEcho::kAtStart),
        heap_trim_(service.heap_trim()) {
    if (absl::Status status = Admit(service); !status.ok()) {
      FinishWith(status);
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (stream_slot_ != nullptr) stream_slot_->Touch();
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

  void OnDone() override {
    metrics_.AddRemoteBytesReceived(received_total_);
    {
      MutexLock lock(&results_mu_);
      metrics_.AddBatchItems(Rpc::kBatchPut, published_, failed_);
    }
    call_.End(outcome_);
    delete this;
  }

 private:
  // The item whose chunks are arriving.
  struct OpenItem {
    size_t index = 0;
    std::string name;
    uint64_t total_bytes = 0;
    uint64_t received = 0;
    uint32_t crc32c = 0;
    std::optional<uint32_t> expected_crc32c;
    // Unset when the item already failed: its chunks are only counted.
    std::optional<PendingVersion> pending;
  };

  // A large batch's receive buffers stay for the next transfer; the heap
  // goes back once large transfers stop (IdleHeapTrim).
  void NoteLargeTransfer() {
    if (heap_activity_ == nullptr && received_total_ >= kTrimAfterBytes) {
      heap_activity_ = std::make_unique<IdleHeapTrim::Activity>(heap_trim_);
    }
  }

  absl::Status Admit(TensorService& service) {
    TENSORD_ASSIGN_OR_RETURN(grant_, service.AdmitCall(context_, "BatchPut"));
    TENSORD_ASSIGN_OR_RETURN(stream_slot_, service.streams().Admit("BatchPut", [this] {
      idle_cancelled_.store(true, std::memory_order_relaxed);
      context_->TryCancel();
    }));
    return absl::OkStatus();
  }

  absl::Status HandleMessage() {
    TENSORD_RETURN_IF_ERROR(decoder_.Decode(request_));
    const StreamMessage& message = decoder_.message();
    switch (message.kind) {
      case StreamMessage::Kind::kHeader: return StartChunkedItem(message.header);
      case StreamMessage::Kind::kChunk: return CopyChunk(message);
      case StreamMessage::Kind::kEmpty: break;
    }
    // Options and whole small items are not in the stream decoder's fields.
    TENSORD_ASSIGN_OR_RETURN(
        const BatchPutItemsDecoder::Message decoded,
        items_decoder_.Decode(decoder_.pieces(), [this](const WireBatchPutItem& item) {
          WirePutHeader header;  // views the item's bytes, valid during this call only
          if (!ParseBatchPutHeader(item, BatchPutItemsDecoder::kItemNesting, header)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "batch put item ", ItemCount(), ": header is not a valid tensord.v1.PutHeader"));
          }
          return TakeWholeItem(header, item.data);
        }));
    if (decoded.has_options) {
      if (messages_ > 0) {
        return absl::InvalidArgumentError("batch put options must be the stream's first message");
      }
      atomic_ = decoded.atomic;
    }
    if (!decoded.has_options && !decoded.has_items) {
      return absl::InvalidArgumentError(
          "batch put message carries no options, items, header or chunk");
    }
    ++messages_;
    return absl::OkStatus();
  }

  size_t ItemCount() {
    MutexLock lock(&results_mu_);
    return results_.size();
  }

  // A new item: its result slot, and the checks and reservation of a Put.
  absl::StatusOr<size_t> BeginItem() {
    ++messages_;
    if (open_.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch put item ", open_->index, " ('", open_->name, "') got ", open_->received, " of ",
          open_->total_bytes, " bytes before the next item began"));
    }
    MutexLock lock(&results_mu_);
    if (results_.size() >= kBatchItemLimit) {
      return absl::InvalidArgumentError(absl::StrCat("batch put has more than ", kBatchItemLimit,
                                                     " items, the most one batch takes; "
                                                     "split it"));
    }
    results_.emplace_back();
    return results_.size() - 1;
  }

  // Item `index`'s checks, copies (as a Put's: PutHeader.replicas or the
  // server's default for the name) and reservation.
  // The header's layout is moved from.
  absl::StatusOr<PendingVersion> PrepareItem(WirePutHeader& header, size_t index) {
    TENSORD_ASSIGN_OR_RETURN(ValidatedPut put,
                             ValidatePutHeader(header, options_.max_tensor_bytes));
    TENSORD_RETURN_IF_ERROR(TensorService::CheckName(grant_, "BatchPut", put.name));
    if (IsDeviceLayout(put.layout)) {
      return absl::FailedPreconditionError(
          absl::StrCat("batch put carries host tensors only; put device tensor '", put.name, "' (",
                       DeviceLabel(put.layout.device), ") with Put"));
    }
    uint32_t replicas = 1;
    if (options_.cluster_access != nullptr) {
      TENSORD_ASSIGN_OR_RETURN(
          replicas, options_.cluster_access->ReplicasFor(put.name, header.replicas, put.retention));
    } else if (header.replicas > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "batch put item '", put.name, "' asks for replicas=", header.replicas,
          ", but this server is a single node (start it with --etcd-endpoints to form a cluster)"));
    }
    if (replicas_.size() <= index) replicas_.resize(index + 1, 1);
    replicas_[index] = replicas;
    return registry_.Prepare(std::move(put.name), std::move(put.layout), put.total_bytes,
                             put.retention);
  }

  absl::Status TakeWholeItem(WirePutHeader& header, std::span<const uint8_t> data) {
    TENSORD_ASSIGN_OR_RETURN(size_t index, BeginItem());
    received_total_ += data.size();
    NoteLargeTransfer();
    // Checked (the name above all) before anything else is said about it.
    absl::StatusOr<PendingVersion> pending = PrepareItem(header, index);
    if (!pending.ok()) {
      FailItem(index, pending.status());
      return absl::OkStatus();
    }
    if (data.size() != pending->total_bytes) {
      FailItem(index, absl::InvalidArgumentError(absl::StrCat(
                          "batch put item ", index, " ('", pending->name, "') declares ",
                          pending->total_bytes, " bytes but carries ", data.size())));
      return absl::OkStatus();
    }
    if (absl::Status written = pending->buffer->Write(0, data.data(), data.size()); !written.ok()) {
      FailItem(index, written);
      return absl::OkStatus();
    }
    pending->crc32c = Crc32c(data.data(), data.size());
    CompleteItem(index, *std::move(pending), header.crc32c);
    return absl::OkStatus();
  }

  absl::Status StartChunkedItem(const std::string& header_bytes) {
    TENSORD_ASSIGN_OR_RETURN(size_t index, BeginItem());
    WirePutHeader header;  // views header_bytes
    if (!ParseWirePutHeader(
            {reinterpret_cast<const uint8_t*>(header_bytes.data()), header_bytes.size()}, header)) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch put item ", index, ": header is not a valid tensord.v1.PutHeader"));
    }
    OpenItem item;
    item.index = index;
    item.name = std::string(header.name);
    item.total_bytes = header.total_bytes;
    item.expected_crc32c = header.crc32c;
    absl::StatusOr<PendingVersion> pending = PrepareItem(header, index);
    if (pending.ok()) {
      item.pending = *std::move(pending);
    } else {
      FailItem(index, pending.status());  // its chunks are still read, and dropped
    }
    open_ = std::move(item);
    if (open_->total_bytes == 0) CloseOpenItem();
    return absl::OkStatus();
  }

  absl::Status CopyChunk(const StreamMessage& chunk) {
    ++messages_;
    if (!open_.has_value()) {
      return absl::InvalidArgumentError(
          "batch put sent a chunk that belongs to no item (chunks follow a PutHeader)");
    }
    OpenItem& item = *open_;
    if (chunk.chunk_offset != item.received) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch put item ", item.index, " ('", item.name,
                       "') sent a chunk at offset ", chunk.chunk_offset, " but ", item.received,
                       " bytes have arrived; chunks must be contiguous and in order"));
    }
    if (chunk.chunk_size > item.total_bytes - item.received) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch put item ", item.index, " ('", item.name, "') sent a chunk [", chunk.chunk_offset,
          ", +", chunk.chunk_size, ") beyond total_bytes ", item.total_bytes));
    }
    if (item.pending.has_value()) {
      for (std::span<const uint8_t> piece : chunk.chunk_pieces) {
        item.crc32c = Crc32cExtend(item.crc32c, piece.data(), piece.size());
      }
      if (absl::Status written = item.pending->buffer->Write(item.received, chunk.chunk_pieces);
          !written.ok()) {
        FailItem(item.index, written);
        item.pending.reset();
      }
    }
    item.received += chunk.chunk_size;
    received_total_ += chunk.chunk_size;
    NoteLargeTransfer();
    if (item.received == item.total_bytes) CloseOpenItem();
    return absl::OkStatus();
  }

  void CloseOpenItem() {
    OpenItem item = *std::move(open_);
    open_.reset();
    if (!item.pending.has_value()) return;
    item.pending->crc32c = item.crc32c;
    CompleteItem(item.index, *std::move(item.pending), item.expected_crc32c);
  }

  // Every byte of an item is in: publish it, or keep it for the group.
  void CompleteItem(size_t index, PendingVersion pending, std::optional<uint32_t> expected) {
    if (atomic_) {
      // The registry checks the rest at the group publish.
      if (expected.has_value() && *expected != *pending.crc32c) {
        FailItem(index, absl::DataLossError(absl::StrCat(
                            "crc32c of the bytes of '", pending.name, "' is ", *pending.crc32c,
                            " but the producer declared ", *expected)));
        return;
      }
      group_.push_back(std::move(pending));
      group_indexes_.push_back(index);
      return;
    }
    {
      MutexLock lock(&results_mu_);
      ++publishing_;
    }
    // In a cluster the items of a batch share etcd commits (group commit).
    PublishLatest(registry_, options_.cluster_access.get(), std::move(pending), expected,
                  replicas_[index], [this, index](absl::StatusOr<VersionInfo> info) {
                    if (info.ok()) {
                      SetPublished(index, *info);
                    } else {
                      FailItem(index, info.status());
                    }
                    PublishedOne();
                  });
  }

  void SetPublished(size_t index, const VersionInfo& info) {
    MutexLock lock(&results_mu_);
    ItemResult& result = results_[index];
    result.version = info.version;
    result.crc32c = info.crc32c;
    result.created_unix_nanos = absl::ToUnixNanos(info.created);
    ++published_;
    published_bytes_ += info.total_bytes;
  }

  // The answer must fit one gRPC message whatever the items say: each
  // message is cut, and once kMessageBudget bytes of them are out, later
  // failures carry their code only.
  void FailItem(size_t index, const absl::Status& status) {
    MutexLock lock(&results_mu_);
    ItemResult& item = results_[index];
    item.code = status.code();
    if (message_bytes_ < kMessageBudget) {
      item.message = std::string(status.message().substr(0, kMaxItemMessage));
      message_bytes_ += item.message.size();
    } else {
      item.message = "(message left out: the batch's failures are many; see the first ones)";
    }
    ++failed_;
    if (first_failure_.empty()) {
      first_failure_ = absl::StrCat("item ", index,
                                    " failed: ", status.message().substr(0, kMaxItemMessage / 2));
    }
  }

  // A publish answered: the batch answers once the stream ended and every
  // publish did.
  void PublishedOne() {
    std::optional<absl::Status> failure;
    {
      MutexLock lock(&results_mu_);
      --publishing_;
      if (!ended_ || publishing_ != 0 || answered_) return;
      answered_ = true;
      failure = deferred_failure_;
    }
    if (failure.has_value()) {
      FinishNow(*failure);
      return;
    }
    Answer();
  }

  // All or nothing: a failed item, or a failed group publish, leaves every
  // item unpublished and says why on each.
  void PublishGroup() {
    {
      MutexLock lock(&results_mu_);
      ++publishing_;
    }
    uint64_t failed = 0;
    std::string first_failure;
    {
      MutexLock lock(&results_mu_);
      failed = failed_;
      first_failure = first_failure_;
    }
    if (group_.empty() && failed == 0) {
      PublishedOne();
      return;
    }
    if (failed > 0) {
      group_.clear();  // unpublished bytes and reservations go now
      FailGroup(absl::AbortedError(absl::StrCat(
          "not published: the atomic batch publishes all items or none, and ", first_failure)));
      PublishedOne();
      return;
    }
    std::vector<PendingVersion> group = std::move(group_);
    group_.clear();
    uint32_t replicas = 1;
    for (size_t index : group_indexes_) replicas = std::max(replicas, replicas_[index]);
    PublishGroupLatest(registry_, options_.cluster_access.get(), std::move(group), {}, replicas,
                       [this](absl::StatusOr<std::vector<VersionInfo>> published) {
                         if (!published.ok()) {
                           FailGroup(published.status());
                         } else {
                           for (size_t i = 0; i < published->size(); ++i) {
                             SetPublished(group_indexes_[i], (*published)[i]);
                           }
                           MutexLock lock(&results_mu_);
                           group_version_ = published->front().version;
                           // Ordered by etcd (durable items in a cluster): the
                           // group's cluster-wide identity.
                           cluster_group_ = static_cast<uint64_t>(published->front().origin);
                         }
                         PublishedOne();
                       });
  }

  void FailGroup(const absl::Status& refused) {
    for (size_t index : group_indexes_) FailItem(index, refused);
  }

  // The stream's checks; then the batch answers once every item's publish
  // did (at once on a single node, after their etcd commits in a cluster).
  void EndOfStream() {
    if (absl::Status complete = CheckComplete(); !complete.ok()) {
      FinishWith(complete);
      return;
    }
    // A cluster commit is not this stream idling.
    stream_slot_.reset();
    if (atomic_) PublishGroup();
    {
      MutexLock lock(&results_mu_);
      ++publishing_;  // the stream's own, taken back by PublishedOne
      ended_ = true;
    }
    PublishedOne();
  }

  absl::Status CheckComplete() {
    if (idle_cancelled_.load(std::memory_order_relaxed)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "batch put sent nothing for longer than the stream idle timeout; cancelled after ",
          published(), " published items"));
    }
    if (context_->IsCancelled()) {
      return absl::CancelledError(absl::StrCat("batch put cancelled by the client after ",
                                               published(), " published items"));
    }
    if (open_.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch put item ", open_->index, " ('", open_->name, "') ended after ", open_->received,
          " of ", open_->total_bytes, " bytes; ", published(), " earlier items were published"));
    }
    return absl::OkStatus();
  }

  uint64_t published() const {
    MutexLock lock(&results_mu_);
    return published_;
  }

  void Answer() {
    AnswerWithResults();
    FinishNow(absl::OkStatus());
  }

  void AnswerWithResults() {
    // Every publish answered: nothing else touches the results now.
    MutexLock lock(&results_mu_);
    Log(LogLevel::kInfo, "batch_put",
        {{"items", results_.size()},
         {"published", published_},
         {"failed", failed_},
         {"bytes", published_bytes_},
         {"group_version", group_version_},
         {"cluster_group", cluster_group_},
         {"request_id", call_.request_id()}});
    *response_ = EncodeBatchPutAnswer(results_, group_version_, cluster_group_);
  }

  // Publishes still answering finish first: the last one finishes the call
  // (the reactor must outlive every callback that touches it).
  void FinishWith(const absl::Status& status) {
    {
      MutexLock lock(&results_mu_);
      if (publishing_ > 0) {
        deferred_failure_ = status;
        ended_ = true;
        return;
      }
      answered_ = true;
    }
    FinishNow(status);
  }

  void FinishNow(const absl::Status& status) {
    outcome_ = status;
    if (!status.ok()) {
      Log(LogLevel::kInfo, "batch_put_failed",
          {{"published", published()},
           {"peer", context_->peer()},
           {"request_id", call_.request_id()},
           {"code", absl::StatusCodeToString(status.code())},
           {"message", status.message()}});
      open_.reset();
      group_.clear();
    }
    // The place among the open streams goes back now that this side is
    // done, not at OnDone: gRPC runs OnDone after the client has its answer,
    // and a client putting in a loop would otherwise find places still held
    // by its own finished puts (seen at the 256 cap under TSan).
    stream_slot_.reset();
    Finish(ToGrpcStatus(status));
  }

  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  Registry& registry_;
  const ServerOptions& options_;
  ServiceMetrics& metrics_;
  CallRecord call_;
  absl::Status outcome_;
  grpc::ByteBuffer request_;
  ByteBufferDecoder decoder_;
  BatchPutItemsDecoder items_decoder_;
  bool atomic_ = false;
  uint64_t messages_ = 0;
  std::optional<OpenItem> open_;
  // Atomic batches: the complete items, and their positions in the batch.
  std::vector<PendingVersion> group_;
  std::vector<size_t> group_indexes_;
  // Each item's copies, by position (the reactor's thread only).
  std::vector<uint32_t> replicas_;
  // One per item, in order; the response is made from them at the end.
  using ItemResult = BatchPutItemOutcome;
  // Publishes answer on cluster threads: what they fill is behind a lock.
  mutable Mutex results_mu_;
  std::vector<ItemResult> results_ ABSL_GUARDED_BY(results_mu_);
  uint64_t group_version_ ABSL_GUARDED_BY(results_mu_) = 0;
  uint64_t cluster_group_ ABSL_GUARDED_BY(results_mu_) = 0;
  std::string first_failure_ ABSL_GUARDED_BY(results_mu_);
  size_t message_bytes_ ABSL_GUARDED_BY(results_mu_) = 0;
  uint64_t published_ ABSL_GUARDED_BY(results_mu_) = 0;
  uint64_t failed_ ABSL_GUARDED_BY(results_mu_) = 0;
  uint64_t published_bytes_ ABSL_GUARDED_BY(results_mu_) = 0;
  size_t publishing_ ABSL_GUARDED_BY(results_mu_) = 0;  // publishes not yet answered
  bool ended_ ABSL_GUARDED_BY(results_mu_) = false;     // the stream ended well
  bool answered_ ABSL_GUARDED_BY(results_mu_) = false;
  // A failure that came while publishes were answering: the call's answer.
  std::optional<absl::Status> deferred_failure_ ABSL_GUARDED_BY(results_mu_);
  uint64_t received_total_ = 0;
  IdleHeapTrim& heap_trim_;
  std::unique_ptr<IdleHeapTrim::Activity> heap_activity_;  // once past kTrimAfterBytes
  const TokenGrant* grant_ = nullptr;
  std::atomic<bool> idle_cancelled_{false};
  // Last: its destructor waits out a watchdog cancel that may still touch
  // the members above.
  std::unique_ptr<ActiveStreams::Slot> stream_slot_;
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* TensorService::BatchPut(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new BatchPutReactor(context, response, registry_, options_, metrics_, *this);
}

}  // namespace tensord
