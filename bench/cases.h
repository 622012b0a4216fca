// The benchmark's sections and what they share: the run's configuration
// (full or smoke), the servers it started, the pre-faulted buffers, and the
// report every row goes to.
#ifndef TENSORD_BENCH_CASES_H_
#define TENSORD_BENCH_CASES_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/measure.h"
#include "bench/report.h"
#include "tensord/client.h"

namespace tensord::bench {

class RawTcpLink;  // baselines.h

// Section titles, in printing order.
inline constexpr char kBaselineSection[] = "Baselines (same run)";
inline constexpr char kRemoteSection[] = "Remote fetch / put over gRPC (TransferPath::kRemote)";
inline constexpr char kSmallOpSection[] =
    "Small ops (each thread its own Client and TCP connection)";
inline constexpr char kLocalSection[] = "Local handoff (TransferPath::kLocal)";
inline constexpr char kBatchSection[] = "Batch calls (BatchPut / BatchFetch), one client each";
inline constexpr char kMemorySection[] = "Server resident memory during a remote fetch";
inline constexpr char kDeviceSection[] =
    "Device tensors over gRPC (staged through pinned host memory on the server)";
inline constexpr char kClusterSection[] =
    "Cluster: etcd and 3 tensord nodes on 127.0.0.1 (kRemote clients)";

struct BenchConfig {
  std::string mode;  // "full" or "smoke"
  uint64_t memcpy_bytes = 0;
  std::vector<uint64_t> transfer_sizes;
  uint64_t fresh_channel_bytes = 0;  // one of transfer_sizes
  int warm_channel_rounds = 0;       // new channels timed before and after a series of calls
  uint64_t memory_probe_bytes = 0;
  std::vector<int> concurrency;
  double load_warmup_s = 0;
  double load_duration_s = 0;  // per concurrency and kind, split in slices
  int load_slices = 1;         // taken in turn with the other kinds
  std::vector<uint64_t> local_sizes;
  std::vector<uint64_t> device_sizes;
  std::vector<uint64_t> batch_tensor_sizes;  // bytes of each tensor of a batch
  std::vector<int> batch_counts;             // tensors per batch call
  // The batch section's scale rows (batch_scale_cases.cc): this many
  // distinct 4 KiB names put and fetched in batches of 1024, and one batch
  // of `batch_mixed_count` items whose sizes cycle through
  // `batch_mixed_sizes` (KV blocks).
  int batch_distinct_names = 0;
  std::vector<uint64_t> batch_mixed_sizes;
  int batch_mixed_count = 0;
  RepeatPolicy batch_scale_policy;
  // Repeats for a transfer of `bytes`: many for small sizes, few for large.
  RepeatPolicy (*transfer_policy)(uint64_t bytes) = nullptr;
  RepeatPolicy latency_policy;      // sub-millisecond local fetches
  RepeatPolicy first_touch_policy;  // page-touch and memcpy of local sizes
  // Repeats for the cases of one batch of `count` tensors.
  RepeatPolicy (*batch_policy)(int count) = nullptr;
  // The cluster section (opt-in): the large tensor of its read-through and
  // replicated-put rows, the small one of its directory-overhead rows, and
  // their repeats (each large round moves the tensor ~6 times).
  uint64_t cluster_large_bytes = 0;
  uint64_t cluster_small_bytes = 0;
  RepeatPolicy cluster_large_policy;
  RepeatPolicy cluster_small_policy;
  // BatchPut rows: small tensors a call, and the calls' repeats.
  int cluster_batch_count = 0;
  RepeatPolicy cluster_batch_policy;
  // Reads timed with their holder paused (each waits out a lease TTL).
  int cluster_failover_rounds = 0;
  // Names in the cluster a node joins (join time, memory per name).
  uint64_t cluster_join_names = 0;

  // The largest buffer any section needs.
  uint64_t LargestBytes() const;
  // The bytes of the mixed-size batch.
  uint64_t BatchMixedBytes() const;
};

BenchConfig FullConfig();
BenchConfig SmokeConfig();

struct BenchEnv {
  const BenchConfig& config;
  Report& report;
  std::string tensord_target;  // "127.0.0.1:PORT"
  pid_t tensord_pid = -1;
  std::string empty_target;  // the empty-call server
  pid_t empty_pid = -1;
  // The same server closing idle connections as tensord does by default.
  std::string empty_closing_idle_target;
  pid_t empty_closing_idle_pid = -1;
  std::string device_backend;  // tensord's --device-backend
  std::string tensord_binary;  // for sections that start more servers (cluster)
  // Pre-faulted, LargestBytes() long; source holds FillPattern(kPatternSeed).
  const Buffer& source;
  Buffer& destination;
};

inline constexpr uint64_t kPatternSeed = 0x7e45;

// A Client of its own (own TCP connection) on `path`.
// `receive_pool_bytes`: ClientOptions::receive_pool_bytes (0: every Fetch
// receives into new memory).
absl::StatusOr<std::unique_ptr<Client>> ConnectClient(
    const BenchEnv& env, TransferPath path,
    uint64_t receive_pool_bytes = ClientOptions().receive_pool_bytes);
// The same to any `target`.
absl::StatusOr<std::unique_ptr<Client>> ConnectClient(
    const std::string& target, TransferPath path,
    uint64_t receive_pool_bytes = ClientOptions().receive_pool_bytes);

// The small-op section's tensor, and its calls on `client` (shared with the
// --call-loop mode, so rates and instruction counts measure the same work):
// a Stat that checks the size, and a Fetch that checks its size and (first
// and every 64th call) every byte. Each belongs to one thread.
inline constexpr uint64_t kSmallOpBytes = 4096;
Operation SmallStatCall(std::shared_ptr<Client> client);
Operation SmallFetchCall(std::shared_ptr<Client> client);

// A 1-D uint8 DLTensor over `data`; `shape` must outlive it.
DLTensor ByteTensor(const void* data, const int64_t* shape);

// "bench/<kind>/<bytes>".
std::string TensorName(const std::string& kind, uint64_t bytes);

// Checks a fetched tensor: `bytes` long and the source pattern at spot
// offsets (DATA_LOSS otherwise).
absl::Status CheckFetched(const Tensor& tensor, uint64_t bytes, const std::string& what);
// The same against spots worked out once (loops of small fetches).
absl::Status CheckFetched(const Tensor& tensor, const PatternSpots& spots, uint64_t bytes,
                          const std::string& what);

// One raw TCP request/response of `bytes` into env.destination, timed; the
// spot marks and the check around it are not.
absl::StatusOr<double> TimedRawTransfer(const BenchEnv& env, RawTcpLink& link, uint64_t bytes);

// A FetchInto of `name` into env.destination (pre-faulted, reused), timed
// from `start`; the spot marks (set before `start`) and the check are not.
absl::StatusOr<double> TimedFetchInto(const BenchEnv& env, Client& client, const std::string& name,
                                      uint64_t bytes, Clock::time_point start = Clock::now(),
                                      const FetchOptions& options = {});

// Puts the first `bytes` of env.source as TensorName(kind, bytes) through
// `client` and checks what the server says it stored.
absl::StatusOr<TensorInfo> PutSource(const BenchEnv& env, Client& client, const std::string& kind,
                                     uint64_t bytes);

// Puts the source as TensorName("remote", bytes) unless the server already
// holds `bytes` under that name (the memory and remote sections share it).
absl::Status EnsureRemoteTensor(const BenchEnv& env, Client& client, uint64_t bytes);

absl::Status RunMemorySection(const BenchEnv& env);
absl::Status RunRemoteSection(const BenchEnv& env);
absl::Status RunSmallOpSection(const BenchEnv& env);
absl::Status RunLocalSection(const BenchEnv& env);
absl::Status RunBatchSection(const BenchEnv& env);
// The batch section's scale rows: many distinct names, and items of mixed
// sizes (batch_scale_cases.cc).
absl::Status RunBatchScaleRows(const BenchEnv& env, Client& remote, Client& local,
                               RawTcpLink& link);
// The batch section's floor: the registry's own cost a small put tensor,
// in this process, against a memcpy and a CRC-32C of its bytes.
absl::Status RunRegistryFloorRows(const BenchEnv& env);
absl::Status RunDeviceSection(const BenchEnv& env);
// Starts its own etcd and nodes; a "skipped" row when /usr/bin/etcd is absent.
absl::Status RunClusterSection(const BenchEnv& env);
// Parts of the cluster section on clusters of their own
// (cluster_scale_cases.cc): a read whose holder is paused, and a node
// joining a cluster of cluster_join_names names.
absl::Status RunClusterFailoverRows(const BenchEnv& env);
absl::Status RunClusterJoinRows(const BenchEnv& env);

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_CASES_H_
