#include "client/src/remote_batch.h"

#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/src/batch_request_wire.h"
#include "client/src/heap_tensor_memory.h"
#include "client/src/host_tensor_source.h"
#include "client/src/info_conversion.h"
#include "client/src/receive_buffer_pool.h"
#include "client/src/slice_latch.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/wire/batch_fetch_items.h"
#include "service/wire/batch_limits.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/call_arena.h"
#include "service/wire/items_message_buffer.h"
#include "service/wire/status_conversion.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

static_assert(kMaxBatchItems == kBatchItemLimit, "client.h and service/wire/batch_limits.h agree");

// The header of `item`, whose compact bytes are `source` (which it views).
PutHeaderWire HeaderOf(const BatchPutItem& item, const CompactSource& source, bool send_crc32c) {
  PutHeaderWire header;
  header.name = item.name;
  header.layout = &source.layout;
  header.total_bytes = source.size;
  if (send_crc32c) header.crc32c = Crc32c(source.data, source.size);
  header.retention = static_cast<int32_t>(item.retention);
  return header;
}

absl::Status StatusOf(const v1::ItemStatus& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.code()), status.message());
}

// Writes a batch's messages: small items gathered into one message of
// about `chunk_bytes`, written by hand (ItemsMessageBuffer: the header
// serialized and the bytes copied once, into the message's slice, or from
// kMinReferencedBatchItemBytes on, referenced where they lie), large ones
// as header and chunks.
class BatchPutWriter {
 public:
  // Chunks of large items and referenced items point into the caller's
  // memory: `latch` counts those gRPC still holds.
  BatchPutWriter(grpc::ClientWriter<grpc::ByteBuffer>& writer, uint32_t chunk_bytes,
                 SliceLatch& latch)
      : writer_(writer), chunk_bytes_(chunk_bytes), latch_(latch) {}

  bool open() const { return open_; }

  void Send(const google::protobuf::MessageLite& message) {
    if (open_) open_ = writer_.Write(SerializeToByteBuffer(message));
  }

  void Add(const PutHeaderWire& header, const CompactSource& source) {
    if (source.size <= kMaxInlineBatchItemBytes) {
      AddWhole(header, source);
      return;
    }
    Flush();
    if (open_) open_ = writer_.Write(EncodeBatchPutHeaderRequest(header));
    for (uint64_t offset = 0; open_ && offset < source.size;) {
      const uint64_t size = std::min<uint64_t>(chunk_bytes_, source.size - offset);
      latch_.Add();
      open_ = writer_.Write(
          MakeChunkBuffer(offset, source.data + offset, size, &SliceLatch::Release, &latch_));
      offset += size;
    }
  }

  void Flush() {
    if (!pending_.has_value()) return;
    if (open_) open_ = writer_.Write(pending_->Finish());
    pending_.reset();
  }

 private:
  // BatchPutRequest.items = 4 { BatchPutItems.items = 1 { BatchPutItem
  // header = 1, data = 2 } }, as the generated serializer writes them.
  void AddWhole(const PutHeaderWire& header, const CompactSource& source) {
    const size_t header_size = PutHeaderSize(header);
    const size_t item_size = LengthDelimitedFieldSize(header_size) +
                             (source.size == 0 ? 0 : LengthDelimitedFieldSize(source.size));
    const size_t field_size = LengthDelimitedFieldSize(item_size);
    // A larger item's bytes are sent from where they lie, not copied.
    const bool referenced = source.size >= kMinReferencedBatchItemBytes;
    const size_t written = referenced ? field_size - source.size : field_size;
    const size_t referenced_size = referenced ? source.size : 0;
    if (!pending_.has_value()) pending_.emplace(kRequestItemsField, chunk_bytes_);
    uint8_t* out = pending_->Reserve(written, referenced_size);
    if (out == nullptr) {  // full: this item starts the next message
      Flush();
      pending_.emplace(kRequestItemsField, chunk_bytes_);
      out = pending_->Reserve(written, referenced_size);
    }
    out = PutLengthPrefix(kItemsItemField, item_size, out);
    out = PutLengthPrefix(kItemHeaderField, header_size, out);
    out = PutPutHeader(header, header_size, out);
    if (source.size == 0) {
      pending_->Commit(out);
      return;
    }
    out = PutLengthPrefix(kItemDataField, source.size, out);
    if (referenced) {
      latch_.Add();
      pending_->CommitReferencing(out, grpc::Slice(const_cast<uint8_t*>(source.data), source.size,
                                                   &SliceLatch::Release, &latch_));
      return;
    }
    std::memcpy(out, source.data, source.size);
    pending_->Commit(out + source.size);
  }

  static constexpr uint32_t kRequestItemsField = 4;
  static constexpr uint32_t kItemsItemField = 1;
  static constexpr uint32_t kItemHeaderField = 1;
  static constexpr uint32_t kItemDataField = 2;

  grpc::ClientWriter<grpc::ByteBuffer>& writer_;
  const uint32_t chunk_bytes_;
  SliceLatch& latch_;
  std::optional<ItemsMessageBuffer> pending_;
  bool open_ = true;
};

// Assembles one fetched item whose bytes come in chunks.
struct OpenItem {
  uint32_t index = 0;
  TensorInfo info;
  std::shared_ptr<HeapTensorMemory> memory;
  uint64_t received = 0;
};

// Answers of a BatchFetch stream in request order: items whole in their
// message (inline) or assembled from the chunks that follow them. Every
// error is the stream's (the server broke the protocol); an item's own
// error is that item's answer.
class BatchFetchAssembler {
 public:
  // `requested`: the names the request named (0 for a prefix or a group).
  BatchFetchAssembler(size_t requested, const FetchOptions& options,
                      ReceiveBufferPool& receive_pool)
      : requested_(requested),
        options_(options),
        receive_pool_(receive_pool),
        unanswered_(absl::InternalError("the server sent no answer for it")) {
    // Copies of one status share its message: no allocation per item.
    results_.reserve(requested);
    for (size_t i = 0; i < requested; ++i) results_.emplace_back(unanswered_);
  }

  absl::Status AddChunk(const StreamMessage& chunk) {
    if (!open_.has_value() || chunk.chunk_offset != open_->received ||
        chunk.chunk_size > open_->info.total_bytes - open_->received) {
      return absl::InternalError("batch fetch sent a chunk out of order");
    }
    auto* out = static_cast<uint8_t*>(open_->memory->data()) + open_->received;
    for (std::span<const uint8_t> piece : chunk.chunk_pieces) {
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
    open_->received += chunk.chunk_size;
    if (open_->received < open_->info.total_bytes) return absl::OkStatus();
    OpenItem done = *std::move(open_);
    open_.reset();
    TENSORD_ASSIGN_OR_RETURN(absl::StatusOr<Tensor> * slot, Place(done.index));
    *slot = Finish(done);
    return absl::OkStatus();
  }

  absl::Status AddItem(WireBatchFetchItem& item) {
    if (open_.has_value()) {
      return absl::InternalError("batch fetch sent an item before the chunks it owed");
    }
    TENSORD_ASSIGN_OR_RETURN(absl::StatusOr<Tensor> * slot, Place(item.index));
    if (item.status_code != 0) {
      *slot = absl::Status(static_cast<absl::StatusCode>(item.status_code), item.status_message);
      return absl::OkStatus();
    }
    OpenItem assembled;
    assembled.index = item.index;
    if (absl::Status valid = InfoFromWire(item.info, assembled.info); !valid.ok()) {
      *slot = std::move(valid);
      return absl::OkStatus();
    }
    TENSORD_ASSIGN_OR_RETURN(assembled.memory, receive_pool_.Allocate(assembled.info.total_bytes));
    if (item.has_inline_data || assembled.info.total_bytes == 0) {
      if (item.inline_data.size() != assembled.info.total_bytes) {
        return absl::InternalError(absl::StrCat("batch fetch item '", assembled.info.name,
                                                "' carries ", item.inline_data.size(), " of ",
                                                assembled.info.total_bytes, " bytes"));
      }
      if (!item.inline_data.empty()) {
        std::memcpy(assembled.memory->data(), item.inline_data.data(), item.inline_data.size());
      }
      *slot = Finish(assembled);
      return absl::OkStatus();
    }
    if (requested_ == 0) results_.pop_back();  // placed again when complete
    open_ = std::move(assembled);
    return absl::OkStatus();
  }

  // A message other than a chunk: no item may still wait for chunks.
  absl::Status ExpectNoOpenItem() const {
    if (!open_.has_value()) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("batch fetch item '", open_->info.name, "' ended before its bytes did"));
  }

  // The stream's end: no item may still wait for chunks.
  absl::Status Finished() const {
    if (!open_.has_value()) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("batch fetch ended inside item '", open_->info.name, "'"));
  }

  std::vector<absl::StatusOr<Tensor>> TakeResults() { return std::move(results_); }

 private:
  // A prefix fetch (no names in the request) answers in order, growing the
  // results; a fetch by name answers each requested index once.
  absl::StatusOr<absl::StatusOr<Tensor>*> Place(uint32_t index) {
    if (requested_ == 0) {
      if (index != results_.size()) {
        return absl::InternalError(
            absl::StrCat("batch fetch item ", index, " arrived out of order"));
      }
      results_.emplace_back(unanswered_);
    } else if (index >= results_.size()) {
      return absl::InternalError(
          absl::StrCat("batch fetch answered item ", index, " of ", results_.size()));
    }
    return &results_[index];
  }

  // Moves from `item`.
  absl::StatusOr<Tensor> Finish(OpenItem& item) const {
    if (options_.verify_crc32c) {
      const uint32_t crc = Crc32c(item.memory->data(), item.info.total_bytes);
      if (crc != item.info.crc32c) {
        return absl::DataLossError(absl::StrCat("fetched bytes of '", item.info.name,
                                                "' have crc32c ", crc, "; the server stored ",
                                                item.info.crc32c));
      }
    }
    return Tensor(std::move(item.info), std::move(item.memory));
  }

  const size_t requested_;
  const FetchOptions& options_;
  ReceiveBufferPool& receive_pool_;
  const absl::Status unanswered_;
  std::vector<absl::StatusOr<Tensor>> results_;
  std::optional<OpenItem> open_;
};

}  // namespace

absl::StatusOr<BatchPutResult> StreamBatchPut(grpc::ChannelInterface* channel,
                                              const grpc::internal::RpcMethod& method,
                                              std::unique_ptr<CallContext> context,
                                              std::span<const BatchPutItem> items,
                                              const BatchPutOptions& options,
                                              uint32_t chunk_bytes) {
  SliceLatch latch;  // before the context, which goes first (SliceLatch)
  std::unique_ptr<CallContext> call_context = std::move(context);
  // What each item was sent as (its compact layout and size): the result
  // is built from it and the answer.
  struct Sent {
    dlpack::TensorLayout layout;
    uint64_t size = 0;
  };
  std::vector<Sent> sent;
  sent.reserve(items.size());
  // Packed copies of strided items sent as chunks or referenced: the
  // slices point into them, and gRPC may hold a slice after its write
  // returned (`latch`).
  std::vector<std::shared_ptr<HeapTensorMemory>> packed_until_sent;
  grpc::ByteBuffer response_bytes;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          channel, method, &call_context->get(), &response_bytes));
  absl::Status local_failure;
  {
    BatchPutWriter batch(*writer, chunk_bytes, latch);
    if (options.atomic) {
      v1::BatchPutRequest first;
      first.mutable_options()->set_atomic(true);
      batch.Send(first);
    }
    for (size_t i = 0; i < items.size() && batch.open(); ++i) {
      absl::StatusOr<CompactSource> source = CompactSourceOf(items[i].tensor);
      if (!source.ok()) {
        local_failure = absl::Status(
            source.status().code(),
            absl::StrCat("item ", i, " ('", items[i].name, "'): ", source.status().message()));
        break;
      }
      batch.Add(HeaderOf(items[i], *source, options.send_crc32c), *source);
      // Chunks and referenced items point into a strided item's packed copy.
      if (source->packed != nullptr && source->size >= kMinReferencedBatchItemBytes) {
        packed_until_sent.push_back(std::move(source->packed));
      }
      sent.push_back({std::move(source->layout), source->size});
      if (options.progress) options.progress(i + 1, items.size());
    }
    batch.Flush();
    if (!local_failure.ok()) call_context->get().TryCancel();
    if (batch.open() && local_failure.ok()) writer->WritesDone();
    grpc::Status status = writer->Finish();
    writer.reset();
    call_context.reset();
    latch.Wait();
    TENSORD_RETURN_IF_ERROR(local_failure);
    TENSORD_RETURN_IF_ERROR(FromGrpcStatus(status));
  }
  google::protobuf::Arena arena(ManyNamesArenaOptions());  // a thousand results: a few blocks
  v1::BatchPutResponse& response =
      *google::protobuf::Arena::CreateMessage<v1::BatchPutResponse>(&arena);
  TENSORD_RETURN_IF_ERROR(ParseFromByteBuffer(response_bytes, response, "batch put response"));
  if (static_cast<size_t>(response.items_size()) != items.size()) {
    return absl::InternalError(absl::StrCat("server answered ", response.items_size(),
                                            " batch put results for ", items.size(), " items"));
  }
  BatchPutResult result;
  result.group_version = response.group_version();
  result.cluster_group = response.cluster_group();
  result.items.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const v1::BatchPutItemResult& item = response.items(static_cast<int>(i));
    if (item.status().code() != 0) {
      result.items.emplace_back(StatusOf(item.status()));
      continue;
    }
    result.items.emplace_back(InfoOfPut(items[i].name, sent[i].layout, sent[i].size,
                                        static_cast<int32_t>(items[i].retention), item.version(),
                                        item.crc32c(), item.created_unix_nanos()));
  }
  return result;
}

absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> StreamBatchFetch(
    grpc::ChannelInterface* channel, const grpc::internal::RpcMethod& method,
    grpc::ClientContext& context, const BatchSelection& selection, const FetchOptions& options,
    ReceiveBufferPool& receive_pool) {
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel, method, &context, EncodeBatchFetchRequest(selection)));
  BatchFetchAssembler assembler(selection.items.size(), options, receive_pool);
  grpc::ByteBuffer message;
  ByteBufferDecoder decoder;
  BatchFetchItemsDecoder items;
  absl::Status failure;
  while (failure.ok() && reader->Read(&message)) {
    failure = decoder.Decode(message);
    if (!failure.ok()) break;
    if (decoder.message().kind == StreamMessage::Kind::kChunk) {
      failure = assembler.AddChunk(decoder.message());
      continue;
    }
    failure = assembler.ExpectNoOpenItem();
    if (failure.ok()) {
      failure = items.Decode(decoder.pieces(),
                             [&](WireBatchFetchItem& item) { return assembler.AddItem(item); });
    }
  }
  if (failure.ok()) failure = assembler.Finished();
  if (!failure.ok()) context.TryCancel();
  grpc::Status status = reader->Finish();
  TENSORD_RETURN_IF_ERROR(FromGrpcStatus(status));
  TENSORD_RETURN_IF_ERROR(failure);
  return assembler.TakeResults();
}

}  // namespace tensord
