// BatchFetch: every chosen version is leased under one registry lock (one
// consistent cut), then streamed: small items whole inside item messages,
// many per message; a larger one as an item message followed by chunks whose
// slices point into its sealed memory, as Fetch sends them.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/transport/batch_fetch_items_wire.h"
#include "service/transport/call_record.h"
#include "service/transport/payload_hold.h"
#include "service/transport/request_validation.h"
#include "service/transport/tensor_service.h"
#include "service/wire/batch_limits.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/status_conversion.h"
#include "service/wire/wire_requests.h"

namespace tensord {
namespace {

// What one item of the answer is, once chosen and leased.
struct BatchEntry {
  uint32_t index = 0;
  absl::StatusOr<Lease> lease;
};

class BatchFetchReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  BatchFetchReactor(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                    Registry& registry, const ServerOptions& options,
                    std::atomic<int64_t>& live_payloads, ServiceMetrics& metrics,
                    TensorService& service)
      : context_(context),
        live_payloads_(live_payloads),
        metrics_(metrics),
        device_backend_(registry.device_backend()),
        message_budget_(options.chunk_bytes),
        cluster_(options.cluster_access.get()),
        call_(Rpc::kBatchFetch, *context, metrics, CallRecord::IdEcho::kAtStart) {
    if (absl::Status status = Start(*request, registry, service); !status.ok()) {
      FailCall(status);
      return;
    }
    if (cluster_group_ != 0) {
      // A group the cluster ordered: found in etcd and copied here first.
      // A token that may not read one item gets none, and nothing is
      // copied for it.
      const TokenGrant* grant = grant_;
      cluster_->EnsureGroup(
          static_cast<int64_t>(cluster_group_),
          [grant](absl::string_view name) {
            return TensorService::CheckName(grant, "BatchFetch", name);
          },
          [this](absl::StatusOr<std::vector<Lease>> leases) {
            if (!leases.ok()) {
              FailCall(leases.status());
              return;
            }
            TakeLeases(*std::move(leases));
            WriteNext();
          });
      return;
    }
    if (requested_.empty()) {
      WriteNext();  // a prefix or a group: leased already
      return;
    }
    // Named items: in a cluster the latest of each is made sure of first
    // (the cluster's read path), then all are leased in one cut.
    std::vector<std::string> latest;
    for (const NameVersionView& item : requested_) {
      if (item.version == 0) latest.emplace_back(item.name);
    }
    ClusterAccess* cluster = options.cluster_access.get();
    if (cluster == nullptr || latest.empty()) {
      AcquireChosen(registry, {});
      WriteNext();
      return;
    }
    std::sort(latest.begin(), latest.end());
    latest.erase(std::unique(latest.begin(), latest.end()), latest.end());
    cluster->EnsureLatest(latest,
                          [this, &registry, latest](std::vector<absl::StatusOr<Lease>> leases) {
                            std::map<std::string, absl::StatusOr<Lease>, std::less<>> confirmed;
                            for (size_t i = 0; i < latest.size(); ++i)
                              confirmed.emplace(latest[i], std::move(leases[i]));
                            AcquireChosen(registry, confirmed);
                            WriteNext();
                          });
  }

  void OnWriteDone(bool ok) override {
    if (stream_slot_ != nullptr) stream_slot_->Touch();
    if (finished_) return;
    if (!ok) {
      FailCall(absl::CancelledError("batch fetch stream broken"));
      return;
    }
    WriteNext();
  }

  void OnDone() override {
    metrics_.AddRemoteBytesSent(bytes_sent_);
    metrics_.AddBatchItems(Rpc::kBatchFetch, items_ok_, items_failed_);
    call_.End(outcome_);
    if (large_ != nullptr) large_->Unref();
    delete this;
  }

 private:
  absl::Status Start(const grpc::ByteBuffer& request_bytes, Registry& registry,
                     TensorService& service) {
    WireBatchFetchRequest request;
    absl::Status parsed = FlattenByteBuffer(request_bytes, request_bytes_, "batch fetch request");
    if (parsed.ok() &&
        !ParseWireBatchFetchRequest({request_bytes_.begin(), request_bytes_.size()}, request)) {
      parsed = absl::InvalidArgumentError(
          "batch fetch request is not a valid tensord.v1.BatchFetchRequest");
    }
    TENSORD_ASSIGN_OR_RETURN(const TokenGrant* grant, service.AdmitCall(context_, "BatchFetch"));
    TENSORD_RETURN_IF_ERROR(parsed);
    const std::optional<std::string> prefix =
        request.prefix.has_value() ? std::optional<std::string>(*request.prefix) : std::nullopt;
    TENSORD_RETURN_IF_ERROR(ValidateBatchSelection("batch fetch", request.items.size(),
                                                   kBatchItemLimit, prefix, request.group_version,
                                                   request.cluster_group));
    if (request.cluster_group != 0 && cluster_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("batch fetch of cluster group ", request.cluster_group,
                       ": this server is not a cluster node (a single node's groups are read by "
                       "group_version)"));
    }
    TENSORD_ASSIGN_OR_RETURN(
        stream_slot_, service.streams().Admit("BatchFetch", [this] { context_->TryCancel(); }));
    if (!request.items.empty()) return ChooseItems(request.items, grant);
    if (request.cluster_group != 0) {
      cluster_group_ = request.cluster_group;
      grant_ = grant;
      return absl::OkStatus();
    }
    std::vector<Lease> leases;
    if (prefix.has_value()) {
      // A token limited to a namespace reads only inside it.
      TENSORD_ASSIGN_OR_RETURN(std::string allowed_prefix,
                               grant == nullptr
                                   ? absl::StatusOr<std::string>(*prefix)
                                   : TokenAuthenticator::ListPrefix(*grant, *prefix, "BatchFetch"));
      TENSORD_ASSIGN_OR_RETURN(leases, registry.AcquirePrefix(allowed_prefix, kBatchItemLimit));
    } else {
      TENSORD_ASSIGN_OR_RETURN(leases, registry.AcquireGroup(request.group_version));
      // All of a group or nothing: a token that may not read one item gets none.
      for (const Lease& lease : leases) {
        TENSORD_RETURN_IF_ERROR(TensorService::CheckName(grant, "BatchFetch", lease->name));
      }
    }
    TakeLeases(std::move(leases));
    return absl::OkStatus();
  }

  // `items` view request_bytes_, which lives as long as the reactor.
  absl::Status ChooseItems(std::span<const WireNameVersion> items, const TokenGrant* grant) {
    entries_.resize(items.size());
    std::vector<NameVersionView> wanted;
    std::vector<uint32_t> wanted_index;
    wanted.reserve(items.size());
    wanted_index.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      entries_[i].index = static_cast<uint32_t>(i);
      if (absl::Status allowed = TensorService::CheckName(grant, "BatchFetch", items[i].name);
          !allowed.ok()) {
        entries_[i].lease = allowed;
        continue;
      }
      wanted.push_back({items[i].name, items[i].version});
      wanted_index.push_back(static_cast<uint32_t>(i));
    }
    requested_ = std::move(wanted);
    requested_index_ = std::move(wanted_index);
    return absl::OkStatus();
  }

  // The leases of a prefix or a group become the answer's items, in order.
  void TakeLeases(std::vector<Lease> leases) {
    entries_.reserve(leases.size());
    for (Lease& lease : leases) {
      entries_.push_back({static_cast<uint32_t>(entries_.size()), std::move(lease)});
    }
  }

  void FailCall(const absl::Status& status) {
    finished_ = true;
    outcome_ = status;
    Finish(ToGrpcStatus(status));
  }

  // Leases every requested item under one registry lock (one consistent
  // cut). In a cluster, a latest item is the version the cluster confirmed
  // (leased in `confirmed`, so found even if replaced since), or answers why
  // there is none.
  void AcquireChosen(Registry& registry,
                     const std::map<std::string, absl::StatusOr<Lease>, std::less<>>& confirmed) {
    std::vector<NameVersionView> wanted;
    std::vector<uint32_t> wanted_index;
    wanted.reserve(requested_.size());
    for (size_t i = 0; i < requested_.size(); ++i) {
      NameVersionView item = requested_[i];
      if (item.version == 0) {
        if (auto it = confirmed.find(item.name); it != confirmed.end()) {
          if (!it->second.ok()) {
            entries_[requested_index_[i]].lease = it->second.status();
            continue;
          }
          item.version = (*it->second)->version;
        }
      }
      wanted.push_back(item);
      wanted_index.push_back(requested_index_[i]);
    }
    std::vector<absl::StatusOr<Lease>> leases = registry.AcquireMany(wanted);
    for (size_t i = 0; i < leases.size(); ++i)
      entries_[wanted_index[i]].lease = std::move(leases[i]);
  }

  // Writes the bytes of a small version at `out` (device versions copied
  // to the host).
  absl::Status CopyOut(const TensorVersion& version, uint8_t* out) const {
    if (version.device_memory == nullptr) {
      std::memcpy(out, version.buffer->data(), version.total_bytes);
      return absl::OkStatus();
    }
    return device_backend_->CopyDeviceToHost(out, *version.device_memory, 0, version.total_bytes,
                                             nullptr);
  }

  // The next message: as many items as fit in the budget (at least one),
  // small ones with their bytes; a large one ends the message, its chunks
  // following.
  void WriteNext() {
    if (large_ != nullptr) {
      WriteLargeChunk();
      return;
    }
    if (next_entry_ == entries_.size()) {
      finished_ = true;  // nothing matched: an empty stream
      Finish(grpc::Status::OK);
      return;
    }
    BatchFetchItemsWire message(message_budget_);
    while (next_entry_ < entries_.size()) {
      absl::StatusOr<bool> added = AddEntry(entries_[next_entry_], message);
      if (!added.ok()) {
        FailStream(added.status());
        return;
      }
      if (!*added) break;
      ++next_entry_;
      if (large_ != nullptr) break;  // its chunks follow this message
    }
    message_ = message.Finish();
    Write();
  }

  // Appends `entry` to `message`; false when it does not fit (the message
  // is full).
  absl::StatusOr<bool> AddEntry(BatchEntry& entry, BatchFetchItemsWire& message) {
    if (!entry.lease.ok()) {
      if (!message.AddFailure(entry.index, entry.lease.status())) return false;
      ++items_failed_;
      return true;
    }
    const TensorVersion& version = **entry.lease;
    const uint64_t size = version.total_bytes;
    const bool inline_bytes = size <= kMaxInlineBatchItemBytes;
    if (!inline_bytes && version.device_memory != nullptr) {
      const absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
          "tensor '", version.name, "' is ", size, " bytes in ", DeviceLabel(version.layout.device),
          " memory; batch fetch copies device tensors of up to ", kMaxInlineBatchItemBytes,
          " bytes, fetch it with Fetch"));
      if (!message.AddFailure(entry.index, refused)) return false;
      ++items_failed_;
      return true;
    }
    if (inline_bytes && size >= kMinReferencedBatchItemBytes && version.device_memory == nullptr) {
      // Sent from where it lies, its lease held until gRPC has sent it.
      const bool added = message.AddVersionReferencing(entry.index, version, [&] {
        auto* hold = new PayloadHold(*std::move(entry.lease), live_payloads_);
        return grpc::Slice(const_cast<uint8_t*>(hold->version().buffer->data()), size,
                           &PayloadHold::UnrefCallback, hold);
      });
      if (!added) return false;
    } else {
      TENSORD_ASSIGN_OR_RETURN(
          const bool added,
          message.AddVersion(entry.index, version, inline_bytes,
                             [this, &version](uint8_t* out) { return CopyOut(version, out); }));
      if (!added) return false;
    }
    ++items_ok_;
    bytes_sent_ += size;
    if (inline_bytes) {
      entry.lease = sent_;  // the lease ends once the bytes are copied
    } else {
      large_ = new PayloadHold(*std::move(entry.lease), live_payloads_);
      large_offset_ = 0;
    }
    return true;
  }

  void WriteLargeChunk() {
    const TensorVersion& version = large_->version();
    const uint64_t size = std::min<uint64_t>(message_budget_, version.total_bytes - large_offset_);
    large_->Ref();  // dropped by gRPC through UnrefCallback
    message_ = MakeChunkBuffer(large_offset_, version.buffer->data() + large_offset_, size,
                               &PayloadHold::UnrefCallback, large_);
    large_offset_ += size;
    if (large_offset_ == version.total_bytes) {
      large_->Unref();
      large_ = nullptr;
    }
    Write();
  }

  void FailStream(const absl::Status& status) {
    finished_ = true;
    outcome_ = status;
    Finish(ToGrpcStatus(status));
  }

  // The last message carries the final status too.
  void Write() {
    if (large_ == nullptr && next_entry_ == entries_.size()) {
      finished_ = true;
      StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&message_);
    }
  }

  grpc::CallbackServerContext* const context_;
  std::atomic<int64_t>& live_payloads_;
  ServiceMetrics& metrics_;
  DeviceBackend* const device_backend_;
  const uint64_t message_budget_;
  ClusterAccess* const cluster_;
  CallRecord call_;
  absl::Status outcome_;
  std::vector<BatchEntry> entries_;
  // What an entry holds once its bytes are in a message: one status for all
  // (a status with a message made per item was an allocation per item).
  const absl::Status sent_ = absl::CancelledError("sent");
  // The request's bytes, and the named items it asks for (not denied by
  // the token, viewed in those bytes) and their entries.
  grpc::Slice request_bytes_;
  std::vector<NameVersionView> requested_;
  std::vector<uint32_t> requested_index_;
  // A cluster group asked for, and the token that asked.
  uint64_t cluster_group_ = 0;
  const TokenGrant* grant_ = nullptr;
  size_t next_entry_ = 0;
  // The large item whose chunks are being sent, and the next chunk's offset.
  PayloadHold* large_ = nullptr;
  uint64_t large_offset_ = 0;
  grpc::ByteBuffer message_;
  bool finished_ = false;
  uint64_t bytes_sent_ = 0;
  uint64_t items_ok_ = 0;
  uint64_t items_failed_ = 0;
  std::unique_ptr<ActiveStreams::Slot> stream_slot_;
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* TensorService::BatchFetch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new BatchFetchReactor(context, request, registry_, options_, live_payloads_, metrics_,
                               *this);
}

}  // namespace tensord
