// The zero-copy local path: leases and memfds (host versions) or device
// handles (device versions) from the handoff socket, mapped or imported into
// this process and cached per (name, version). Device imports are shared by
// every connection of the process (DeviceImportCache).
#ifndef TENSORD_CLIENT_SRC_LOCAL_TRANSPORT_H_
#define TENSORD_CLIENT_SRC_LOCAL_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "client/src/arena_mappings.h"
#include "client/src/client_transport.h"
#include "client/src/handoff_connection.h"
#include "service/common/mutex.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/client.h"
#include "tensord/tensor.h"

namespace tensord {

// One version this process holds a lease and memfd (or arena slot) for;
// shared by every Tensor mapped from it. The lease ends when the last of
// them is gone.
class HeldVersion;

// Thread-safe.
class PutStaging;

class LocalTransport final : public ClientTransport {
 public:
  explicit LocalTransport(std::shared_ptr<HandoffConnection> connection);
  ~LocalTransport() override;

  // create + copy + seal: one copy, no gRPC. Host memory only (Client sends
  // device puts over gRPC).
  absl::StatusOr<TensorInfo> Put(absl::string_view name, const DLTensor& tensor,
                                 const PutOptions& options, const CallOptions& call) override;

  // A tensor mapping the server's bytes: a private copy-on-write mapping
  // (writable, changes stay in this process) or, with `read_only`, the
  // shared read-only mapping with DLPACK_FLAG_BITMASK_READ_ONLY. A device
  // version comes back as the import of the server's device memory
  // ({kDLCUDA, id}, always flagged READ_ONLY: there is no private copy), or,
  // with `device_to_host`, is refused with use_remote so the caller copies
  // it to the host over gRPC. A failed import is refused with use_remote too.
  absl::StatusOr<Tensor> Fetch(absl::string_view name, const FetchOptions& options,
                               const CallOptions& call) override;

  // Copies the held bytes into `destination` (any strides). Device versions
  // are refused with use_remote (they go over gRPC).
  absl::StatusOr<TensorInfo> FetchInto(absl::string_view name, const DLTensor& destination,
                                       const FetchOptions& options,
                                       const CallOptions& call) override;

  // A writer of host memory, or, with `options.device` set ({kDLCUDA, N}),
  // of device memory on the server's device N imported into this process.
  absl::StatusOr<std::unique_ptr<TensorWriter>> Create(absl::string_view name, DLDataType dtype,
                                                       std::span<const int64_t> shape,
                                                       const CreateOptions& options,
                                                       const CallOptions& call) override;

  // Seals creates of this transport's connection as one atomic group
  // (SealGroupRequest). Every writer is closed by the call, sealed or not.
  absl::StatusOr<SealGroupResult> SealGroup(std::span<const std::unique_ptr<TensorWriter>> writers,
                                            bool send_crc32c);
  // The items written into one sealed memfd of this process's and sent in
  // one put_many request per kMaxPutManyItems items or kMaxPutManyBytes
  // (local_batch_put.cc). An atomic batch must fit one request (else
  // use_remote); so must everything in a cluster (use_remote: its puts
  // commit through etcd over gRPC).
  absl::StatusOr<BatchPutResult> BatchPut(std::span<const BatchPutItem> items,
                                          const BatchPutOptions& options,
                                          const CallOptions& call) override;
  // Many leases in one request (AcquireMany): mapped as Fetch maps one.
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> BatchFetch(const BatchSelection& selection,
                                                                 const FetchOptions& options,
                                                                 const CallOptions& call) override;
  const std::shared_ptr<HandoffConnection>& connection() const { return connection_; }

 private:
  absl::StatusOr<std::shared_ptr<HeldVersion>> Hold(absl::string_view name, uint64_t version,
                                                    bool host_only);
  // A new lease's HeldVersion: its memfd, arena slot or device import.
  // Remembered in held_ (so a Hold of that version, or of the name's latest
  // when it is that version, needs no new lease) unless `remember` is
  // false: a batch's thousands of items skip that index (a string copy, a
  // hash insert and a lock each), and a later single fetch of one of them
  // takes a lease of its own.
  // What an acquire answer says of its lease, read from either form of
  // the answer (AcquireResponse for one tensor, WireAcquiredItem for a
  // batch's).
  struct LeaseGrant {
    uint64_t lease_id = 0;
    uint64_t mapping_bytes = 0;
    uint64_t mapping_offset = 0;
    uint64_t arena_id = 0;
    const v1::DeviceHandle* device_handle = nullptr;  // null when none came
  };
  absl::StatusOr<std::shared_ptr<HeldVersion>> Adopt(const LeaseGrant& grant, TensorInfo&& info,
                                                     ScopedFd fd, bool remember = true);
  // The result of one item of a batch answer: its hold, or its refusal.
  absl::StatusOr<std::shared_ptr<HeldVersion>> AdoptItem(WireAcquiredItem& item,
                                                         std::vector<ScopedFd>& fds,
                                                         size_t& next_fd);
  // Sends one AcquireManyRequest (`request`, with `appended_fields` after
  // its own: a request by name framed by hand) and adopts every lease of
  // its answer:
  // `item_count` results in request order for a name list (0: prefix or
  // group, in the server's order).
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> AdoptBatch(v1::HandoffRequest& request,
                                                                 absl::string_view appended_fields,
                                                                 size_t item_count,
                                                                 const FetchOptions& options);
  // The tensors of one batch packet's holds (each taken), handed to
  // `place` with the hold's index: one private view per arena for them all
  // unless `options.read_only`.
  void MakeBatchTensors(std::span<std::shared_ptr<HeldVersion>> holds, const FetchOptions& options,
                        absl::FunctionRef<void(size_t, absl::StatusOr<Tensor>)> place);
  // The Tensor a fetch returns from a held version (see Fetch).
  // `sole_holder`: nothing else reads `held`'s info later (a batch item's
  // hold), so the tensor takes it instead of a copy.
  absl::StatusOr<Tensor> TensorOf(std::shared_ptr<HeldVersion> held, const FetchOptions& options,
                                  bool sole_holder = false);
  // Maps (or finds mapped) the arena a new lease's slot lies in.
  absl::Status MapArenaSlot(HeldVersion& held, const LeaseGrant& grant, ScopedFd fd);
  // Imports the device memory a new lease came with into `held`.
  absl::Status ImportDevice(HeldVersion& held, const LeaseGrant& grant, ScopedFd fd);
  absl::StatusOr<std::unique_ptr<TensorWriter>> CreateOnDevice(uint64_t create_id, uint64_t size,
                                                               const v1::CreateResponse& created,
                                                               ScopedFd fd, DLDevice device);

  std::shared_ptr<HandoffConnection> connection_;
  ArenaMappings arenas_;
  // Batch puts write their bytes here, one request at a time
  // (local_batch_put.cc).
  Mutex put_mutex_;
  std::unique_ptr<PutStaging> put_staging_ ABSL_GUARDED_BY(put_mutex_);
  // put_staging_ of at least `bytes` (a new one when it is smaller).
  absl::Status EnsureStagingLocked(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(put_mutex_);
  Mutex mutex_;
  // Held versions by (name, version); expired entries are pruned on insert.
  absl::flat_hash_map<std::pair<std::string, uint64_t>, std::weak_ptr<HeldVersion>> held_
      ABSL_GUARDED_BY(mutex_);
  size_t held_after_prune_ ABSL_GUARDED_BY(mutex_) = 0;
  // Arenas a batch acquire names as mapped, at most.
  static constexpr size_t kMaxNamedArenas = 1024;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_LOCAL_TRANSPORT_H_
