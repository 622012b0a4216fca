// One local client's connection to the handoff socket: its leases, its
// pending creates, and the answers to its requests. Pure logic (no socket
// I/O), so tests and fuzz targets drive it directly.
#ifndef TENSORD_SERVICE_TRANSPORT_HANDOFF_SESSION_H_
#define TENSORD_SERVICE_TRANSPORT_HANDOFF_SESSION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/common/unix_socket.h"
#include "service/metrics/service_metrics.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"
#include "service/transport/acquired_item_wire.h"
#include "service/transport/handoff_tokens.h"
#include "service/transport/request_validation.h"
#include "service/wire/wire_requests.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/v1/handoff.pb.h"

namespace tensord {

struct HandoffLimits {
  uint64_t max_tensor_bytes = uint64_t{4} << 30;
  uint64_t max_leases_per_connection = 65536;
  // A create not sealed within this long is reclaimed; nothing is published.
  absl::Duration create_timeout = absl::Seconds(60);
};

// Not thread-safe: one session belongs to one connection's thread.
class HandoffSession {
 public:
  // Bytes handed out and sealed are added to `metrics`.
  // `cluster` (null for a single node) must outlive the session.
  HandoffSession(Registry& registry, HandoffTokens& tokens, const HandoffLimits& limits,
                 PeerCredentials peer, bool authorized, ServiceMetrics& metrics,
                 ClusterAccess* cluster = nullptr)
      : registry_(registry),
        tokens_(tokens),
        limits_(limits),
        peer_(peer),
        authorized_(authorized),
        metrics_(metrics),
        cluster_(cluster) {}

  struct Reply {
    std::string bytes;  // a serialized HandoffResponse
    // To pass along (memfds, or device allocations' fds), owned by the
    // session: a memfd by its lease or create, an exported device fd until
    // the next Handle call (send the reply before that). At most one,
    // except in a batch acquire's packets (kMaxFdsPerPacket).
    std::vector<int> fds;
    int fd() const { return fds.empty() ? -1 : fds.front(); }
  };
  // Answers one packet. Never fails: every error becomes a response with a
  // canonical code and a message naming the bad value.
  Reply Handle(absl::string_view packet, absl::Time now);

  // In a cluster some answers wait for it (a read of a latest version, a
  // seal): Handle then returns nullopt and, later, calls `resume` once,
  // from a cluster thread, with the Finisher that makes the reply. The
  // Finisher must run on the session's thread, and no other packet of the
  // session may be handled before it ran.
  using Finisher = absl::AnyInvocable<Reply() &&>;
  using Resume = std::function<void(Finisher)>;
  std::optional<Reply> Handle(absl::string_view packet, absl::Time now, const Resume& resume);
  // A packet that came with an fd: only a put_many request carries one (its
  // memfd); any other request with an fd is refused. The fd is closed once
  // answered.
  std::optional<Reply> Handle(absl::string_view packet, ScopedFd fd, absl::Time now,
                              const Resume& resume);

  // Reclaims creates whose timeout has passed.
  void ReapExpiredCreates(absl::Time now);

  size_t lease_count() const { return leases_.size(); }
  size_t create_count() const { return creates_.size(); }
  const PeerCredentials& peer() const { return peer_; }
  const HandoffScope& scope() const { return scope_; }

 private:
  // A lease this connection holds and, for a device version, the export
  // sent with it: its keepalive holds the device memory until the lease
  // ends (its fd is closed once sent: one open fd per connection, not per
  // lease).
  struct HeldLease {
    Lease lease;
    ExportedHandle device_export;
  };
  struct PendingCreate {
    PendingVersion version;
    uint32_t replicas = 1;         // copies its seal waits for (cluster)
    ExportedHandle device_export;  // device creates: what the producer imported
    absl::Time deadline;
  };

  // Holds an exported fd until the reply carrying it has been sent.
  int KeepUntilSent(ScopedFd fd);
  // The reply to a parsed request, answered now.
  Reply Answer(const v1::HandoffRequest& request, absl::Time now);
  // A put_many parsed by hand (ParseWirePutManyRequest), answered now; its
  // response on `arena`.
  Reply AnswerPutMany(WirePutManyRequest& request, google::protobuf::Arena& arena, absl::Time now);
  // `response` with `status` when it is an error, noting fd exhaustion.
  Reply Finish(v1::HandoffResponse& response, const absl::Status& status, Reply reply,
               absl::Time now);
  // `response` with `status` when it is an error.
  static Reply Encode(v1::HandoffResponse& response, const absl::Status& status, Reply reply);
  // Starts what a request must ask the cluster first; true when it did
  // (the reply then comes through `resume`).
  bool StartInCluster(const v1::HandoffRequest& request, absl::Time now, const Resume& resume);
  // A seal's commit through the cluster; the reply comes through `resume`.
  bool SealInCluster(const v1::HandoffRequest& request, const Resume& resume);
  bool SealGroupInCluster(const v1::HandoffRequest& request, const Resume& resume);
  // The creates a seal group consumes, checked (every one pending, none twice).
  absl::StatusOr<std::vector<PendingVersion>> TakeGroup(
      const v1::SealGroupRequest& request, std::vector<std::optional<uint32_t>>& expected);
  // A batch acquire's answer (acquire_many, acquire_more) goes in
  // `batch_answer`, not in `response`.
  absl::Status Dispatch(const v1::HandoffRequest& request, absl::Time now,
                        v1::HandoffResponse& response, std::vector<int>& fds,
                        std::string& batch_answer);
  // What every request but authenticate passes first: the peer's
  // authorization and the leases it ends; and, unless it `continues_batch`
  // (acquire_more), the end of an unfinished batch answer.
  absl::Status Admit(std::span<const uint64_t> release_lease_ids, bool continues_batch);
  // The requests whose answers carry no fd.
  absl::Status DispatchWithoutFd(const v1::HandoffRequest& request, v1::HandoffResponse& response);
  // Batch acquire (handoff_batch_acquire.cc): every lease at once, the
  // answer split into packets of at most kMaxBatchPacketBytes and
  // kMaxFdsPerPacket fds; the first goes out now, the rest on AcquireMore.
  // `answer` gets the packet's AcquireManyResponse bytes, framed by hand
  // (AcquiredItemWire).
  absl::Status AcquireMany(const v1::AcquireManyRequest& request, std::string& answer,
                           std::vector<int>& fds);
  absl::Status AcquireMore(std::string& answer, std::vector<int>& fds);
  // Takes the lease of one chosen item and describes it in `item` (its
  // export, for a device version, in `device_handle` and `exported`), or
  // says why the item is refused. Done as the item's packet is written, so
  // the first packet does not wait for every item's.
  struct PendingBatch;
  struct PendingBatchItem;
  absl::Status LeaseItem(PendingBatch& batch, Lease& lease, PendingBatchItem& item);
  // The leases a batch acquire chose, under one registry lock, with each
  // item's position; a refused item carries its status instead.
  absl::StatusOr<std::vector<std::pair<uint32_t, absl::StatusOr<Lease>>>> ChooseBatch(
      const v1::AcquireManyRequest& request);
  absl::Status Acquire(const v1::AcquireRequest& request, v1::AcquireResponse& response, int& fd);
  absl::Status Release(const v1::ReleaseRequest& request);
  absl::Status Create(const v1::CreateRequest& request, absl::Time now,
                      v1::CreateResponse& response, int& fd);
  // A write's description checked as a Put header is (name, layout, size,
  // --max-tensor-bytes) and against this connection's scope: Create's and
  // put_many's items'.
  absl::StatusOr<ValidatedPut> CheckWrite(const std::string& name, const v1::TensorLayout& layout,
                                          uint64_t total_bytes, v1::Retention retention) const;
  absl::StatusOr<ValidatedPut> CheckWrite(absl::string_view name, WireLayout layout,
                                          uint64_t total_bytes, int32_t retention) const;
  absl::Status Seal(const v1::SealRequest& request, v1::SealResponse& response);
  absl::Status Abort(const v1::AbortRequest& request);
  absl::Status SealGroup(const v1::SealGroupRequest& request, v1::SealGroupResponse& response);
  absl::Status Authenticate(const v1::AuthenticateRequest& request);
  // A local batch put (handoff_put_many.cc): every item copied out of the
  // client's sealed `memfd` and published, each answered in `response`.
  // Its items' layouts are moved out of `request`.
  absl::Status PutMany(WirePutManyRequest& request, ScopedFd memfd, v1::PutManyResponse& response);
  // The same, parsed by protobuf (a packet ParseWirePutManyRequest leaves
  // to it).
  absl::Status PutMany(const v1::PutManyRequest& request, ScopedFd memfd,
                       v1::PutManyResponse& response);
  // Exports `allocation` for the client and describes it in `proto`.
  absl::StatusOr<ExportedHandle> ExportDevice(const DeviceAllocation& allocation,
                                              v1::DeviceHandle* proto);

  Registry& registry_;
  HandoffTokens& tokens_;
  const HandoffLimits& limits_;
  const PeerCredentials peer_;
  bool authorized_;
  // Every name for an allow-listed peer; a redeemed token's otherwise.
  HandoffScope scope_;
  ServiceMetrics& metrics_;
  ClusterAccess* const cluster_;
  // In a cluster, while a read's reply is made after the cluster answered:
  // per name, its lease on the version to serve, or why there is none.
  const absl::flat_hash_map<std::string, absl::StatusOr<Lease>>* cluster_leases_ = nullptr;
  // The version a read of `name` at `version` serves: `version` itself,
  // or in a cluster for 0 the one the cluster confirmed (its lease keeps it
  // findable), or the cluster's refusal.
  absl::StatusOr<uint64_t> VersionToRead(absl::string_view name, uint64_t version) const;
  uint64_t next_id_ = 1;
  // Exported device fds of the reply last sent, closed at the next request.
  std::vector<ScopedFd> sent_export_fds_;
  // One item of a batch acquire's answer not yet sent: its lease joins
  // leases_ once its packet is written (a Release naming an id not yet
  // sent finds nothing to end).
  struct PendingBatchItem {
    // The version chosen in the batch's cut, until LeaseItem takes it.
    std::optional<Lease> chosen;
    AcquiredItemFields fields;  // fd_attached and device_handle set when written
    HeldLease held;
    std::optional<v1::DeviceHandle> device_handle;
    ScopedFd exported;  // a device export's fd, passed with the item
  };
  // The rest of a batch acquire's answer, a packet written per AcquireMore.
  // Its scalars are set by AcquireMany (no default member initializers:
  // clang then cannot construct it inside std::optional while this class
  // is being defined).
  struct PendingBatch {
    // In answer order; those before `next` are written. One allocation
    // for the batch (a deque would make one per item, as large as these).
    std::vector<PendingBatchItem> items;
    size_t next;
    // Arenas whose fd the client has, or that an earlier packet carried.
    absl::flat_hash_set<uint64_t> arenas_known;
    size_t device_exports;
    bool host_only;  // the request's: refuse device versions
    bool accepts_arena_slots;
  };
  // Drops the unsent rest of a batch answer and the leases it carries,
  // which the client never learned of.
  void DropPendingPackets();
  std::optional<PendingBatch> pending_batch_;
  // The items vector of the last batch answer finished on this thread,
  // emptied, for the next one: at 300 bytes an item, a thousand items are
  // past malloc's mmap threshold, and a fresh vector per batch was a
  // mapping and its page faults each time. One per thread (the handoff
  // loop's), not one per connection; not kept past kMaxSpareBatchItems.
  static std::vector<PendingBatchItem>& SpareBatchItems();
  absl::flat_hash_map<uint64_t, HeldLease> leases_;
  absl::flat_hash_map<uint64_t, PendingCreate> creates_;
  // The fd the packet being answered came with (put_many's memfd).
  ScopedFd packet_fd_;
  // put_many reads its memfd through this window (handoff_put_many.cc),
  // kept for the connection's next one.
  std::vector<uint8_t> put_many_window_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_HANDOFF_SESSION_H_
