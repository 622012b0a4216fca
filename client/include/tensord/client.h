// tensord::Client: put and fetch named tensors on a tensord server.
#ifndef TENSORD_CLIENT_CLIENT_H_
#define TENSORD_CLIENT_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tensord/dlpack.h"
#include "tensord/tensor.h"

namespace tensord {

// How Fetch, FetchInto and Put move bytes.
enum class TransferPath {
  // Local handoff when the server's handoff socket is reachable from this
  // host (same boot id), gRPC streaming otherwise.
  kAuto,
  // Always gRPC streaming.
  kRemote,
  // Always local handoff; UNAVAILABLE when it cannot be reached. Calls
  // only gRPC serves still take it (Stat, List, Delete, ...), and so does a
  // BatchPut the handoff refuses with use_remote (see BatchPut).
  kLocal,
};

struct ClientOptions {
  // "host:port", "unix:PATH" or any gRPC target.
  std::string server = "localhost:50051";
  // Data bytes per put chunk message.
  uint32_t chunk_bytes = 1 << 20;
  // Largest gRPC message either way; must exceed both sides' chunk sizes.
  uint32_t max_message_bytes = 8 << 20;
  // Deadline of each call that sets none (CallOptions::timeout); infinite
  // by default.
  absl::Duration timeout = absl::InfiniteDuration();
  // While a call is in flight, a connection that has brought nothing back
  // for keepalive_time is pinged, and one whose ping gets no answer within
  // keepalive_timeout is closed (its calls fail UNAVAILABLE). This bounds
  // how long a call outlives its deadline against a server that stopped
  // reading: a cancelled put returns once gRPC gives back the chunks its
  // socket holds, which takes the connection closing. tensord accepts
  // pings no more often than every 10 s. Infinite keepalive_time: no pings.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(20);
  // Give this client its own TCP connection rather than sharing one with
  // other clients of the same target in the process.
  bool own_connection = true;
  // gRPC's retry machinery. tensord sets no retry policy, so all it would
  // do is retry a call transparently when gRPC knows the server never saw
  // it (a stream the server refused, or sent after a GOAWAY); off, such a
  // call fails UNAVAILABLE. It costs every call more client CPU than
  // tensord's own work on a Stat or a small fetch (bench/README.md), and it
  // does not save a call that crosses a server's idle close (see
  // connection_idle_timeout).
  bool grpc_retries = false;
  // A connection with no call for this long is closed by the client; its
  // next call connects again. A server closes an idle connection without
  // warning (--connection-idle-timeout, gRPC's max_connection_idle), and a
  // call that crosses that close fails UNAVAILABLE, while one crossing the
  // client's own close waits for the new connection: so keep this below
  // half the server's (10 min by default), since gRPC closes between one
  // and two idle timeouts after the last call. At least 1 s (gRPC's
  // minimum); infinite: never.
  absl::Duration connection_idle_timeout = absl::Minutes(4);
  TransferPath path = TransferPath::kAuto;
  // The handoff socket; empty means ask the server (GetServerInfo).
  std::string handoff_socket;
  // Sent as `x-request-id` with every gRPC call that sets none of its own
  // (CallOptions::request_id) so the server's log lines
  // for them carry it (request_id=...). Empty: the server makes one per
  // call. Otherwise 1..128 characters of [A-Za-z0-9._:/+=-] (Connect
  // answers INVALID_ARGUMENT for others).
  std::string request_id;
  // TLS, on when `tls` is true or any tls_* field is set. Each tls_* field
  // is PEM contents or the path of a PEM file.
  bool tls = false;
  std::string tls_root_ca;      // CA that signed the server's certificate; empty: system roots
  std::string tls_client_cert;  // with tls_client_key: mutual TLS
  std::string tls_client_key;
  // Sent as "authorization: Bearer <token>" on every call (servers run with
  // --tokens-file); empty sends none.
  std::string bearer_token;
  // Remote Fetch of a tensor of 256 KiB or more receives into memory that a
  // released fetched tensor left behind, when one fits, so it does not pay
  // the first touch of every page again. Up to this many bytes of released
  // buffers are kept per client; the kernel may reclaim them under memory
  // pressure (they are MADV_FREE'd), and a buffer unused for
  // receive_pool_idle_release is unmapped at the client's next Fetch or
  // release. 0 turns the pool off.
  uint64_t receive_pool_bytes = uint64_t{1} << 30;
  absl::Duration receive_pool_idle_release = absl::Seconds(30);
};

// Cancels the calls it is given to (CallOptions::cancellation), from any
// thread: a gRPC call in flight ends at once with CANCELLED, and a call
// that starts after Cancel answers CANCELLED before any byte moves. A
// local handoff call (microseconds on the server's host) is checked
// before it starts. Thread-safe; one may serve many calls; it must
// outlive every call it was given to.
class CallCancellation {
 public:
  CallCancellation();
  ~CallCancellation();
  CallCancellation(const CallCancellation&) = delete;
  CallCancellation& operator=(const CallCancellation&) = delete;

  // Idempotent.
  void Cancel();
  bool cancelled() const;

  // The state the client's calls register with (client/src).
  struct State;
  State& state() const { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

// What one call sets for itself, apart from the connection's ClientOptions
// (as Arrow Flight's FlightCallOptions beside FlightClientOptions). Every
// Client method takes one, last; the default changes nothing.
struct CallOptions {
  // This call's deadline, from its start; unset: ClientOptions::timeout.
  // Must be positive. gRPC calls only: a local handoff call takes none.
  std::optional<absl::Duration> timeout;
  // Sent as `x-request-id` for this call instead of
  // ClientOptions::request_id (the same rules: 1..128 characters of
  // [A-Za-z0-9._:/+=-]; INVALID_ARGUMENT otherwise).
  std::string request_id;
  // Cancel() ends the call; null: it runs to its end or deadline.
  const CallCancellation* cancellation = nullptr;
};

// For a program that moves large tensors over gRPC, once (it changes
// glibc's malloc for the whole process, so no Client does it): sets the
// malloc trim threshold to 64 MiB, so gRPC's receive buffers are reused
// instead of being returned to the kernel and faulted in again on every
// transfer, which cost a warm channel 40% of its fetch throughput. The
// costs: up to 64 MiB more resident memory per malloc arena, and glibc's
// mmap threshold no longer rises from 128 KiB (blocks above it keep
// mappings of their own). Idempotent and thread-safe; glibc only.
void TuneMallocForTransfers();

// Called as bytes move: (bytes done, bytes in total).
using ProgressCallback = std::function<void(uint64_t, uint64_t)>;

// Most concurrent streams one remote transfer is split into.
inline constexpr uint32_t kMaxFetchStreams = 8;
inline constexpr uint32_t kMaxPutStreams = kMaxFetchStreams;

struct PutOptions {
  // Send the CRC-32C of the bytes so the server verifies them end to end
  // (DATA_LOSS on mismatch). Costs one pass over the bytes before sending.
  bool send_crc32c = false;
  // kCache makes the version evictable; kDefault and kPinned are durable
  // (kept in snapshots, never evicted).
  Retention retention = Retention::kDefault;
  // Where the server stores the tensor: unset for host memory, {kDLCUDA, N}
  // for device N of the server's device backend (the bytes are sent from
  // this host tensor over gRPC and copied to the device there). The server
  // answers FAILED_PRECONDITION when it has no device backend and
  // INVALID_ARGUMENT for a device it lacks. Needs TransferPath kAuto or
  // kRemote (for a zero-copy device write on the server's host use Create
  // with CreateOptions::device). Fetching such a tensor over the local
  // handoff returns the server's device memory ({kDLCUDA, N}); over gRPC,
  // or with FetchOptions::device_to_host, host (kDLCPU) memory.
  // TensorInfo::device says where the server holds it.
  std::optional<DLDevice> device;
  ProgressCallback progress;
  // Copies, in a cluster: the put is acknowledged once this server and
  // replicas-1 other live nodes hold it (a node killed after that loses no
  // reader). 0 takes the server's default for the name (--default-replicas),
  // 1 this server only. Above 1 the put goes over gRPC (the local handoff's
  // create/seal publishes on one node) and needs a cluster with that many
  // live nodes: FAILED_PRECONDITION before any byte moves otherwise.
  uint32_t replicas = 0;
  // Remote put of a large host tensor: how many concurrent streams (each on
  // a TCP connection of its own) carry its byte ranges; the server writes
  // each at its offset and publishes once every part is in and the whole's
  // CRC-32C checks. 0 chooses from the size: one stream per 64 MiB up to 4
  // (on a 2-core host a 1 GiB put in 4 streams ran about 1.5x as fast as in
  // 2: the server's parts also wait on new pages), and one on a 1-core host;
  // 1 always puts in one stream; up to kMaxPutStreams (8).
  // Parts are at least 16 MiB. Device puts and the local handoff use one.
  // Every part must reach the same tensord: behind a load balancer that
  // spreads connections over several servers, set 1. A server older than
  // PutPart gets the put in one stream (remembered per client).
  // With streams > 1, `progress` is called from several threads, one at a
  // time.
  uint32_t streams = 0;
};

struct SnapshotResult {
  std::string path;  // the snapshot file on the server's host
  uint64_t tensor_count = 0;
  uint64_t total_bytes = 0;  // tensor bytes written
};

// One node of a tensord cluster, as it registered itself in etcd.
struct ClusterNode {
  std::string name;
  std::string advertise_address;   // host:port of its gRPC service
  bool handoff_available = false;  // serves zero-copy local handoff on its host
  uint64_t host_bytes_used = 0;
  uint64_t host_bytes_limit = 0;
  std::string server_version;
  absl::Time started;
};

// What a server knows of its cluster. `node_name` is empty (and `nodes`
// too) when the server runs as a single node (no --etcd-endpoints).
struct ClusterMembers {
  std::string node_name;
  // The live members as the server last read them from etcd, itself
  // included, by name.
  std::vector<ClusterNode> nodes;
};

struct FetchOptions {
  // 0 means the latest version.
  uint64_t version = 0;
  // Local handoff only: map the stored bytes shared and read-only (the
  // DLManagedTensorVersioned gets DLPACK_FLAG_BITMASK_READ_ONLY; a write
  // faults). By default the mapping is private copy-on-write: reads are
  // zero-copy, a consumer's write changes only its own page. The tensors of
  // one BatchFetch share one such mapping per server arena (their pages never
  // overlap), which stays mapped until the last of them is dropped. Device
  // tensors imported over the local handoff are always flagged read-only.
  bool read_only = false;
  // Check the received bytes against the server's CRC-32C (DATA_LOSS on
  // mismatch). Costs one pass over the bytes. Not applied to a device
  // tensor returned as device memory (its bytes are not host-readable).
  bool verify_crc32c = false;
  // For a tensor the server holds in device memory: return a host (kDLCPU)
  // copy, made by the server over gRPC (with kLocal: FAILED_PRECONDITION),
  // instead of the zero-copy import of its device memory that kAuto and
  // kLocal give by default. No effect on host tensors.
  bool device_to_host = false;
  // Remote Fetch/FetchInto of a large tensor: how many concurrent streams
  // (each on a TCP connection of its own) carry its byte ranges, each
  // received into its place. 0 chooses from the size and the host: one
  // stream per 64 MiB up to 4, and never more than half the cores (so one
  // on a 2-core host). 1 always fetches in one stream; up to 8. Parts are
  // at least 16 MiB. All parts read the same version.
  uint32_t streams = 0;  // at most kMaxFetchStreams
  // With streams > 1 it is called from several threads, one at a time.
  ProgressCallback progress;
};

struct CreateOptions {
  Retention retention = Retention::kDefault;
  // Unset: the buffer is host memory (a memfd mapped here). {kDLCUDA, N}:
  // device memory on device N of the server's device backend, charged to
  // its --max-device-bytes (RESOURCE_EXHAUSTED naming the device and the
  // bytes), imported into this process; TensorWriter::data() is then a
  // device pointer (write it with cudaMemcpy or a kernel; with the simulated
  // backend it is host memory).
  std::optional<DLDevice> device;
  // Copies, in a cluster: Seal (and SealGroup) return once the cluster
  // ordered the version (its etcd name record written), this server
  // published it and replicas-1 other live nodes hold a copy, as a Put is
  // acknowledged. 0 takes the server's default for the name
  // (--default-replicas), 1 this server only. Checked at Create, before
  // anything is allocated: FAILED_PRECONDITION when fewer nodes are live,
  // or when the server is a single node and this is above 1. On a single
  // node the seal waits for nothing more. When the copies fail, the seal
  // returns that error, but the version stands on this server.
  uint32_t replicas = 0;
};

struct ListResult {
  std::vector<TensorInfo> tensors;
  std::string next_page_token;  // empty on the last page
  uint64_t total_bytes = 0;     // bytes the server holds
};

// Most items one batch call carries; BatchPut and BatchFetch split longer
// lists into several calls (an atomic BatchPut cannot be split).
inline constexpr size_t kMaxBatchItems = 65536;

// One tensor of a BatchPut.
struct BatchPutItem {
  std::string name;
  // Host memory, any strides; read, never written, and not retained.
  DLTensor tensor{};
  Retention retention = Retention::kDefault;
};

struct BatchPutOptions {
  // Publish every item under one version number at once, or none of them:
  // readers never see some items new and others old (a model's state
  // dict). At most kMaxBatchItems items, with distinct names.
  bool atomic = false;
  // Send each item's CRC-32C so the server verifies it (DATA_LOSS fails
  // that item).
  bool send_crc32c = false;
  // Called as items are sent: (items sent, items in total). Over the local
  // handoff, once, when every item was answered.
  ProgressCallback progress;
};

struct BatchPutResult {
  // One per item, in order: what was published, or why that item was not.
  std::vector<absl::StatusOr<TensorInfo>> items;
  // An atomic batch that published: the version every item has (fetch the
  // group with BatchFetchGroup). 0 otherwise.
  uint64_t group_version = 0;
  // In a cluster, an atomic batch of durable names: the etcd revision that
  // ordered the group, which a cluster watch reports as its version (fetch
  // the group through any node with BatchFetchClusterGroup). 0 otherwise.
  uint64_t cluster_group = 0;
};

// What SealGroup published: every writer's version, all at once.
struct SealGroupResult {
  // In the writers' order.
  std::vector<TensorInfo> items;
  // The version every item has (fetch the group with BatchFetchGroup).
  uint64_t group_version = 0;
  // In a cluster, a group of durable names: the etcd revision that ordered
  // it, which a cluster watch reports as its version (fetch the group
  // through any node with BatchFetchClusterGroup). 0 otherwise.
  uint64_t cluster_group = 0;
};

// A tensor to fetch: 0 means its latest version.
struct TensorRef {
  std::string name;
  uint64_t version = 0;
};

struct WatchOptions {
  // Changes after this version: resume where an earlier watch stopped
  // (WatchStream::position()). 0: from the start of this watch on.
  uint64_t from_version = 0;
  // First the latest version of each matching name (events marked
  // `existing`), then the changes after them, with nothing missed in
  // between. Not with from_version.
  bool send_existing = false;
  // Events received but not yet taken by Next; past this the client stops
  // reading, the server holds back, and a watcher that stays behind for
  // longer than the server's history (--watch-history) gets kFellBehind.
  size_t max_buffered_events = 4096;
  // In a cluster: every durable publish and delete on any node (a watch of
  // the etcd name records; cache puts are not seen), positioned by etcd
  // revision; a publish's items carry only name, version (the record's
  // etcd revision, not a node's number), total_bytes, crc32c and
  // TensorInfo::node (the node that took the put); a delete's the name. A
  // reader swaps to a new version by fetching the name from its own node,
  // which pulls it from a holder if it must. FAILED_PRECONDITION from a
  // single-node server.
  bool cluster = false;
};

struct WatchEvent {
  enum class Kind {
    kPublished,  // new versions (an atomic group: one event, every item)
    kDeleted,
    kEvicted,  // cache versions the server removed to make room
    // Changes in (missed_after, version] may be missing: re-read what this
    // watcher needs (Stat, List, BatchFetchPrefix); events go on after.
    kFellBehind,
  };
  Kind kind = Kind::kPublished;
  // The change's place in the server's order (a publish's version; a
  // delete or eviction takes a number of its own). An existing event: the
  // item's version. kFellBehind: where the watcher resumed.
  uint64_t version = 0;
  // Published: the new versions that match the prefix. Deleted or evicted:
  // the versions removed.
  std::vector<TensorInfo> items;
  bool atomic_group = false;
  bool existing = false;      // sent first, for WatchOptions::send_existing
  uint64_t missed_after = 0;  // kFellBehind only
};

// One Watch call. Next from one thread at a time; Cancel from any.
// Destroying it cancels the call and waits for gRPC to let go of it.
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  // The next event, waiting up to `timeout` (DEADLINE_EXCEEDED when none
  // came; the stream goes on). Once the call has ended and every event is
  // taken: its final status (CANCELLED after Cancel, UNAVAILABLE when the
  // server shut down or the connection broke).
  virtual absl::StatusOr<WatchEvent> Next(absl::Duration timeout = absl::InfiniteDuration()) = 0;
  // Every change up to this version has been returned by Next or reported
  // missed: a later watch resumes with WatchOptions::from_version = this.
  // Positions hold within one run of the server: after it restarts, a
  // position below its restored snapshot is reported as behind, but one
  // past it may name changes the new run numbers differently, so watch
  // again with send_existing after a restart (the call ends UNAVAILABLE).
  virtual uint64_t position() const = 0;
  virtual void Cancel() = 0;
};

// A buffer in the server's memory being filled by this process (local
// create/seal). Write the bytes through data(), then Seal() publishes them as
// a new version; destroying an unsealed writer aborts the create.
//
// Device buffers: Seal publishes the device bytes as they are when it runs,
// so the producer must first make its writes complete (synchronize the CUDA
// stream it wrote on, e.g. cudaStreamSynchronize). Readers do not wait on
// the producer's work: no CUDA IPC event is exchanged (not implemented).
class TensorWriter {
 public:
  virtual ~TensorWriter() = default;
  // Writable, 256-byte aligned; size() bytes (compact layout). A device
  // pointer when device() is not kDLCPU.
  virtual void* data() = 0;
  virtual uint64_t size() const = 0;
  // Where data() points: {kDLCPU, 0}, or {kDLCUDA, N} for a device create.
  virtual DLDevice device() const { return DLDevice{kDLCPU, 0}; }
  // Unmaps (closes the import of) the buffer and publishes it. With
  // `send_crc32c` the server checks the bytes against a CRC-32C computed
  // here first.
  virtual absl::StatusOr<TensorInfo> Seal(bool send_crc32c = false) = 0;
};

// Thread-safe: one Client may serve many threads. A thread that makes a
// Stat or a fetch over gRPC keeps one gRPC completion queue for such calls
// until it exits (whatever Client it used), so gRPC stays initialized while
// such threads live; a forked child makes its own.
class Client {
 public:
  // Creates the channel; does not wait for the server (the first call does).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Publishes `tensor` (host memory; any strides and byte_offset, packed
  // when not compact) as a new version of `name`. The caller keeps ownership
  // of the memory, which is read, never written, and not retained.
  absl::StatusOr<TensorInfo> Put(absl::string_view name, const DLTensor& tensor,
                                 const PutOptions& options = {}, const CallOptions& call = {});

  // The whole tensor. Host tensors: the server's memfd mapped here (local
  // handoff) or a copy of its own (gRPC), 256-byte aligned.
  // Device tensors over the local handoff (kAuto, kLocal): zero-copy, the
  // server's device memory imported into this process (CUDA IPC; the
  // simulated backend's memfd): the DLTensor's device is {kDLCUDA, N}, its
  // data a device pointer, and the versioned struct is flagged READ_ONLY
  // (it is the stored version itself; never write it). Imports are cached
  // per process and shared by every Client; the deleter drops the import
  // reference and ends the lease. When this process cannot import (e.g. no
  // CUDA here), kAuto copies over gRPC and kLocal answers with the reason.
  // Over gRPC, or with FetchOptions::device_to_host, a device tensor comes
  // back as host memory (kDLCPU).
  absl::StatusOr<Tensor> Fetch(absl::string_view name, const FetchOptions& options = {},
                               const CallOptions& call = {});

  // Fills memory the caller owns (inference workers preallocate). dtype and
  // shape must match the stored tensor (INVALID_ARGUMENT naming both);
  // `destination` may have any strides and byte_offset. `destination` is
  // host memory; a device tensor is copied over gRPC (kLocal:
  // FAILED_PRECONDITION).
  absl::StatusOr<TensorInfo> FetchInto(absl::string_view name, const DLTensor& destination,
                                       const FetchOptions& options = {},
                                       const CallOptions& call = {});

  // Bytes [offset, offset + length) of the stored bytes (length 0: to the
  // end), appended to `out`. For ranged reads of large tensors.
  absl::StatusOr<TensorInfo> FetchBytes(absl::string_view name, uint64_t offset, uint64_t length,
                                        std::string& out, const FetchOptions& options = {},
                                        const CallOptions& call = {});

  absl::StatusOr<TensorInfo> Stat(absl::string_view name, uint64_t version = 0,
                                  const CallOptions& call = {});

  // One page of names starting with `prefix`.
  absl::StatusOr<ListResult> List(absl::string_view prefix, uint32_t page_size = 0,
                                  absl::string_view page_token = "", const CallOptions& call = {});
  // Every page, concatenated.
  absl::StatusOr<std::vector<TensorInfo>> ListAll(absl::string_view prefix,
                                                  const CallOptions& call = {});
  // In a cluster: the latest version of every durable name, from the etcd
  // name records, one page (cache names have no record and are not listed;
  // TensorInfo::version is the record's etcd revision and ::node the node
  // that took the put; layout and creation time are not in the record).
  // FAILED_PRECONDITION from a single-node server.
  absl::StatusOr<ListResult> ListCluster(absl::string_view prefix, uint32_t page_size = 0,
                                         absl::string_view page_token = "",
                                         const CallOptions& call = {});

  // Removes `name` (only while at `version`, when not 0); returns the
  // removed version.
  absl::StatusOr<uint64_t> Delete(absl::string_view name, uint64_t version = 0,
                                  const CallOptions& call = {});

  // Zero-copy put for a producer on the server's host: a compact buffer for
  // a new version of `name`, filled in place. Needs local handoff
  // (UNAVAILABLE otherwise).
  absl::StatusOr<std::unique_ptr<TensorWriter>> Create(absl::string_view name, DLDataType dtype,
                                                       std::span<const int64_t> shape,
                                                       Retention retention = Retention::kDefault,
                                                       const CallOptions& call = {});
  // The same, in host or (CreateOptions::device) device memory.
  absl::StatusOr<std::unique_ptr<TensorWriter>> Create(absl::string_view name, DLDataType dtype,
                                                       std::span<const int64_t> shape,
                                                       const CreateOptions& options,
                                                       const CallOptions& call = {});

  // Many tensors in few calls. Over the local handoff (kAuto on the
  // server's host, or kLocal) the bytes go in a memfd, which the server
  // copies: an atomic batch in one request (up to 4096 items or 256 MiB),
  // another in requests of up to 256 items, two in flight (this thread
  // writes one while the server copies the one before); otherwise over gRPC, where
  // small ones travel many to a message. A cluster node, an atomic batch
  // too large for one handoff request, and a batch with an item over 256
  // MiB take the gRPC path, under kLocal too. Once one handoff request of a
  // batch was answered, or one went out and its answer never came (the
  // socket broke), a request that fails fails only its items and those not
  // sent ("not known to be published"), never the call: a retry would
  // publish the answered items twice. Each item succeeds or fails on its own (its
  // entry in the result), as Put would; an atomic batch publishes all or
  // none. The call itself fails only when the batch cannot be sent (bad
  // options, a broken stream or socket).
  absl::StatusOr<BatchPutResult> BatchPut(std::span<const BatchPutItem> items,
                                          const BatchPutOptions& options = {},
                                          const CallOptions& call = {});
  // Many tensors, each leased at the same moment on the server (one
  // consistent cut per call of up to kMaxBatchItems items): one entry per
  // item in order, a missing one failing only itself. Over the local
  // handoff one request leases them all (AcquireMany) and each comes back
  // mapped as Fetch maps it (read_only, device imports; arenas mapped once);
  // over gRPC as host copies. Under kAuto an item only gRPC can serve
  // (device_to_host of a device tensor) sends the whole batch over gRPC.
  // `options.version` is ignored (each TensorRef has its own);
  // `options.verify_crc32c` checks each gRPC copy.
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> BatchFetch(std::span<const TensorRef> items,
                                                                 const FetchOptions& options = {},
                                                                 const CallOptions& call = {});
  // The latest version of every name starting with `prefix`, in name order,
  // all from one cut; OUT_OF_RANGE when more than kMaxBatchItems match.
  absl::StatusOr<std::vector<Tensor>> BatchFetchPrefix(absl::string_view prefix,
                                                       const FetchOptions& options = {},
                                                       const CallOptions& call = {});
  // Every item of the atomic group published as `group_version`, in name
  // order; NOT_FOUND when any of them is gone.
  absl::StatusOr<std::vector<Tensor>> BatchFetchGroup(uint64_t group_version,
                                                      const FetchOptions& options = {},
                                                      const CallOptions& call = {});
  // In a cluster: every item of the atomic group of durable names that the
  // cluster ordered at `cluster_group` (BatchPutResult::cluster_group, or a
  // cluster watch event's version), through any node, in name order, each
  // at that group's version: NOT_FOUND when that revision ordered no group
  // (or etcd compacted it away) or an item has been overwritten or deleted
  // since; UNAVAILABLE when no live node holds an item; FAILED_PRECONDITION
  // from a server that is not a cluster node. Always over gRPC.
  absl::StatusOr<std::vector<Tensor>> BatchFetchClusterGroup(uint64_t cluster_group,
                                                             const FetchOptions& options = {},
                                                             const CallOptions& call = {});
  // Seals writers from this client's local Create as one atomic group:
  // every version is published under one version number at once, or none
  // is. Each writer is consumed (closed) either way; the infos come in the
  // writers' order. Needs local handoff (UNAVAILABLE otherwise).
  absl::StatusOr<SealGroupResult> SealGroup(std::span<const std::unique_ptr<TensorWriter>> writers,
                                            bool send_crc32c = false, const CallOptions& call = {});
  // The changes to names starting with `prefix` as they happen, in the
  // server's order (gRPC). Returns once the server has started the watch,
  // so a refusal (PERMISSION_DENIED, RESOURCE_EXHAUSTED at --max-watches,
  // OUT_OF_RANGE for a from_version past the server's last) comes from
  // here; ClientOptions::timeout bounds that wait, not the watch.
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(absl::string_view prefix,
                                                     const WatchOptions& options = {},
                                                     const CallOptions& call = {});
  // Admin: makes the server write its durable tensors to its --snapshot-dir
  // now (FAILED_PRECONDITION when it has none). Returns once the snapshot is
  // on disk (fsynced); a server killed afterwards restores it at restart.
  absl::StatusOr<SnapshotResult> Snapshot(const CallOptions& call = {});

  // The cluster the server belongs to: its own node name and the members.
  absl::StatusOr<ClusterMembers> ClusterNodes(const CallOptions& call = {});

  // The server's grpc.health.v1 status for `service` ("" = the whole
  // server): "SERVING", "NOT_SERVING", ...; UNAVAILABLE when unreachable.
  absl::StatusOr<std::string> Health(absl::string_view service = "", const CallOptions& call = {});

  // True when calls take the local handoff path.
  bool local() const;

 private:
  struct Rep;
  explicit Client(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_CLIENT_H_
