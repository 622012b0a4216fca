// Batch calls against single calls: BatchPut and BatchFetch of N tensors of
// one size from one client, against N single Put/Fetch calls of the same
// tensors (the batch speedup), raw TCP of the same N x size bytes, and N
// empty calls, all in the same rounds. Fetches run on a kRemote client and
// on a kLocal one. The local rows measure whatever path that client's
// BatchFetch takes and say which, read from the fetched tensors' DLPack
// IS_COPIED flag (a gRPC copy, or the server's bytes mapped over the
// handoff). Puts run on both clients too: the local BatchPut is the
// handoff socket's put_many, the local single Put its create/copy/seal.
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/baselines.h"
#include "bench/cases.h"
#include "bench/empty_server.h"
#include "bench/proc_stats.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

constexpr uint64_t kTargetTensorBytes = 4096;
constexpr double kTargetTensorsPerSecond = 100000;
constexpr int kLocalTargetCount = 1024;
constexpr char kRawTcp[] = "raw TCP, same bytes";

// The tensors of one size, back to back in one pre-faulted buffer. Tensor i
// holds the pattern of its own seed, so an answer that puts item j's bytes
// in item i's place fails the check.
struct BatchTensors {
  uint64_t bytes = 0;
  int64_t shape = 0;  // ByteTensor points at it: do not move once items exist
  Buffer buffer;
  std::vector<uint32_t> crc32c;

  static uint64_t Seed(int i) { return kPatternSeed + 1 + static_cast<uint64_t>(i); }
  const uint8_t* data(int i) const { return buffer.data() + bytes * static_cast<uint64_t>(i); }
};

absl::StatusOr<BatchTensors> MakeTensors(uint64_t bytes, int count) {
  BatchTensors tensors;
  tensors.bytes = bytes;
  tensors.shape = static_cast<int64_t>(bytes);
  TENSORD_ASSIGN_OR_RETURN(tensors.buffer, Buffer::Allocate(bytes * static_cast<uint64_t>(count)));
  for (int i = 0; i < count; ++i) {
    FillPattern(tensors.buffer.data() + bytes * static_cast<uint64_t>(i), bytes,
                BatchTensors::Seed(i));
    tensors.crc32c.push_back(Crc32c(tensors.data(i), bytes));
  }
  return tensors;
}

// "bench/batch/<kind>/<bytes>/<i>", zero-padded so name order is item order.
std::string ItemName(absl::string_view kind, uint64_t bytes, int i) {
  return absl::StrFormat("bench/batch/%s/%d/%04d", kind, bytes, i);
}

absl::Status ItemError(const absl::Status& status, absl::string_view what, int i) {
  return absl::Status(status.code(), absl::StrCat(what, " item ", i, ": ", status.message()));
}

// Each of `stored` says it holds item i's bytes (size and CRC-32C).
absl::Status CheckItemsStored(const std::vector<absl::StatusOr<TensorInfo>>& stored,
                              const BatchTensors& tensors, size_t count, absl::string_view what) {
  if (stored.size() != count) {
    return absl::DataLossError(
        absl::StrCat(what, " answered ", stored.size(), " of ", count, " items"));
  }
  for (size_t i = 0; i < count; ++i) {
    const absl::StatusOr<TensorInfo>& info = stored[i];
    if (!info.ok()) return ItemError(info.status(), what, static_cast<int>(i));
    if (info->total_bytes != tensors.bytes || info->crc32c != tensors.crc32c[i]) {
      return absl::DataLossError(absl::StrCat(what, " item ", i, " stored ", info->total_bytes,
                                              " bytes with crc32c ", info->crc32c, ", expected ",
                                              tensors.bytes, " with ", tensors.crc32c[i]));
    }
  }
  return absl::OkStatus();
}

// Each of `fetched` holds item i's bytes (size, and its pattern at spots).
absl::Status CheckItemsFetched(const std::vector<absl::StatusOr<Tensor>>& fetched,
                               const BatchTensors& tensors, size_t count, absl::string_view what) {
  if (fetched.size() != count) {
    return absl::DataLossError(
        absl::StrCat(what, " answered ", fetched.size(), " of ", count, " items"));
  }
  for (size_t i = 0; i < count; ++i) {
    const int index = static_cast<int>(i);
    const absl::StatusOr<Tensor>& tensor = fetched[i];
    if (!tensor.ok()) return ItemError(tensor.status(), what, index);
    if (tensor->empty() || tensor->data_bytes() != tensors.bytes) {
      return absl::DataLossError(absl::StrCat(what, " item ", i, ": fetched ",
                                              tensor->empty() ? 0 : tensor->data_bytes(),
                                              " bytes, expected ", tensors.bytes));
    }
    TENSORD_RETURN_IF_ERROR(CheckPattern(tensor->dl_tensor().data, tensors.bytes,
                                         BatchTensors::Seed(index),
                                         absl::StrCat(what, " item ", i)));
  }
  return absl::OkStatus();
}

// Which path fetched tensors took, over every run of a case: "gRPC copies",
// "handoff mappings" or "mixed".
class PathSeen {
 public:
  // Releases every tensor of `fetched` (checked already), noting its path.
  void Release(std::vector<absl::StatusOr<Tensor>>& fetched) {
    for (absl::StatusOr<Tensor>& tensor : fetched) {
      DLManagedTensorVersioned* managed = tensor->release_versioned();
      const bool copy = (managed->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0;
      managed->deleter(managed);
      const char* path = copy ? "gRPC copies" : "handoff mappings";
      if (path_.empty())
        path_ = path;
      else if (path_ != path)
        path_ = "mixed";
    }
    fetched.clear();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What one size's batches run against.
struct BatchPeers {
  Client& remote;
  Client& local;
  Operation& empty_call;
  RawTcpLink& link;
};

TimedRun BatchFetchRun(Client& client, const std::vector<TensorRef>& refs,
                       const BatchTensors& tensors, PathSeen* seen) {
  return [&client, &refs, &tensors, seen]() -> absl::StatusOr<double> {
    const Clock::time_point start = Clock::now();
    TENSORD_ASSIGN_OR_RETURN(std::vector<absl::StatusOr<Tensor>> fetched, client.BatchFetch(refs));
    const double seconds = SecondsSince(start);
    TENSORD_RETURN_IF_ERROR(CheckItemsFetched(fetched, tensors, refs.size(), "BatchFetch"));
    if (seen != nullptr) seen->Release(fetched);
    return seconds;
  };
}

// Back-to-back batches, each result dropped before the next call: what a
// loop pays per batch (locally the ends of the leases included: they ride
// on the next call or go from the client's releaser thread). The bytes are
// checked once, untimed, before the loop.
TimedRun BatchFetchAndDropRun(Client& client, const std::vector<TensorRef>& refs,
                              const BatchTensors& tensors) {
  constexpr int kBatches = 4;
  return [&client, &refs, &tensors]() -> absl::StatusOr<double> {
    {
      TENSORD_ASSIGN_OR_RETURN(std::vector<absl::StatusOr<Tensor>> fetched,
                               client.BatchFetch(refs));
      TENSORD_RETURN_IF_ERROR(CheckItemsFetched(fetched, tensors, refs.size(), "BatchFetch"));
    }
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kBatches; ++i) {
      TENSORD_ASSIGN_OR_RETURN(std::vector<absl::StatusOr<Tensor>> fetched,
                               client.BatchFetch(refs));
      for (const absl::StatusOr<Tensor>& tensor : fetched) TENSORD_RETURN_IF_ERROR(tensor.status());
    }
    return SecondsSince(start) / kBatches;
  };
}

// N single Fetch calls of the latest versions, each tensor kept until all
// arrived (as a batch holds them).
TimedRun SingleFetchRun(Client& client, const std::vector<TensorRef>& refs,
                        const BatchTensors& tensors, PathSeen* seen) {
  return [&client, &refs, &tensors, seen]() -> absl::StatusOr<double> {
    std::vector<absl::StatusOr<Tensor>> fetched;
    fetched.reserve(refs.size());
    const Clock::time_point start = Clock::now();
    for (const TensorRef& ref : refs) fetched.push_back(client.Fetch(ref.name));
    const double seconds = SecondsSince(start);
    TENSORD_RETURN_IF_ERROR(CheckItemsFetched(fetched, tensors, refs.size(), "single Fetch"));
    if (seen != nullptr) seen->Release(fetched);
    return seconds;
  };
}

// What each call of one case cost the server: its threads' CPU time from
// before the call to after it, beside the call's timed part. The window
// holds the call's untimed part too (checking the answers, and any server
// work it sets off, such as lease ends). Not the client's CPU: its checks
// would be counted as its work.
struct ServerCpu {
  std::vector<double> cpu_s;
  std::vector<double> timed_s;
};

// `run`, noting what each call of it costs the server `server` in `spent`.
TimedRun CountingServerCpu(TimedRun run, pid_t server, ServerCpu& spent) {
  return [run = std::move(run), server, &spent]() -> absl::StatusOr<double> {
    TENSORD_ASSIGN_OR_RETURN(const ThreadCpuNanos before, ReadThreadCpuNanos(server));
    TENSORD_ASSIGN_OR_RETURN(const double seconds, run());
    TENSORD_ASSIGN_OR_RETURN(const ThreadCpuNanos after, ReadThreadCpuNanos(server));
    spent.cpu_s.push_back(static_cast<double>(CpuNanosBetween(before, after)) / 1e9);
    spent.timed_s.push_back(seconds);
    return seconds;
  };
}

// The cases of one batch of `count` tensors, in rounds, and their rows.
absl::Status MeasureBatch(const BenchEnv& env, const BatchPeers& peers, const BatchTensors& tensors,
                          int count) {
  const uint64_t bytes = tensors.bytes;
  const uint64_t total = bytes * static_cast<uint64_t>(count);
  std::vector<BatchPutItem> put_items;
  std::vector<TensorRef> fetch_refs;
  for (int i = 0; i < count; ++i) {
    put_items.push_back(
        {.name = ItemName("put", bytes, i), .tensor = ByteTensor(tensors.data(i), &tensors.shape)});
    fetch_refs.push_back({.name = ItemName("fetch", bytes, i)});
  }
  PathSeen local_batch_path;
  PathSeen local_single_path;

  // In the order they run in each round.
  enum Case {
    kRaw,
    kEmpty,
    kBatchPut,
    kSinglePut,
    kBatchFetch,
    kSingleFetch,
    kLocalBatchFetch,
    kLocalSingleFetch,
    kLocalBatchFetchAndDrop,
    kLocalBatchPut,
    kLocalSinglePut,
    kBatchFetchAndDrop,
    kBatchPutBackToBack,
    kWholePut,
    kLocalWholePut
  };
  auto batch_put = [&](Client& client) -> TimedRun {
    return [&]() -> absl::StatusOr<double> {
      const Clock::time_point start = Clock::now();
      TENSORD_ASSIGN_OR_RETURN(BatchPutResult result, client.BatchPut(put_items));
      const double seconds = SecondsSince(start);
      TENSORD_RETURN_IF_ERROR(
          CheckItemsStored(result.items, tensors, put_items.size(), "BatchPut"));
      return seconds;
    };
  };
  // 4 batch puts back to back, as a writer's loop runs them.
  auto batch_puts_back_to_back = [&](Client& client) -> TimedRun {
    return [&]() -> absl::StatusOr<double> {
      constexpr int kBatches = 4;
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < kBatches; ++i) {
        TENSORD_ASSIGN_OR_RETURN(BatchPutResult result, client.BatchPut(put_items));
        for (const auto& item : result.items) TENSORD_RETURN_IF_ERROR(item.status());
      }
      return SecondsSince(start) / kBatches;
    };
  };
  auto single_puts = [&](Client& client) -> TimedRun {
    return [&]() -> absl::StatusOr<double> {
      std::vector<absl::StatusOr<TensorInfo>> stored;
      stored.reserve(put_items.size());
      const Clock::time_point start = Clock::now();
      for (const BatchPutItem& item : put_items)
        stored.push_back(client.Put(item.name, item.tensor));
      const double seconds = SecondsSince(start);
      TENSORD_RETURN_IF_ERROR(CheckItemsStored(stored, tensors, put_items.size(), "single Put"));
      return seconds;
    };
  };
  // The batch's bytes as one tensor in one Put: the same bytes on the same
  // connection without an item's work. A reference, not a bound: a tensor
  // past the arenas' 1 MiB gets a new memfd of its own (its pages faulted
  // in), where small items go to arena slots already mapped, so a batch of
  // 64 KiB items can beat it.
  const int64_t whole_shape = static_cast<int64_t>(total);
  auto whole_put = [&](Client& client) -> TimedRun {
    return [&]() -> absl::StatusOr<double> {
      const Clock::time_point start = Clock::now();
      TENSORD_ASSIGN_OR_RETURN(
          TensorInfo stored,
          client.Put(ItemName("whole", bytes, count), ByteTensor(tensors.data(0), &whole_shape)));
      const double seconds = SecondsSince(start);
      if (stored.total_bytes != total) {
        return absl::DataLossError(absl::StrCat("one Put of the batch's bytes stored ",
                                                stored.total_bytes, " of ", total, " bytes"));
      }
      return seconds;
    };
  };
  std::vector<TimedRun> cases = {
      [&] { return TimedRawTransfer(env, peers.link, total); },
      [&]() -> absl::StatusOr<double> {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < count; ++i) TENSORD_RETURN_IF_ERROR(peers.empty_call());
        return SecondsSince(start);
      },
      batch_put(peers.remote),
      single_puts(peers.remote),
      BatchFetchRun(peers.remote, fetch_refs, tensors, nullptr),
      SingleFetchRun(peers.remote, fetch_refs, tensors, nullptr),
      BatchFetchRun(peers.local, fetch_refs, tensors, &local_batch_path),
      SingleFetchRun(peers.local, fetch_refs, tensors, &local_single_path),
      BatchFetchAndDropRun(peers.local, fetch_refs, tensors),
      batch_put(peers.local),
      single_puts(peers.local),
      BatchFetchAndDropRun(peers.remote, fetch_refs, tensors),
      batch_puts_back_to_back(peers.remote)};
  if (count > 1) {  // one tensor is already the batch of one
    cases.push_back(whole_put(peers.remote));
    cases.push_back(whole_put(peers.local));
  }
  // The batch calls' cost to the server, call by call.
  std::vector<ServerCpu> server_cpu(cases.size());
  for (const Case c : {kBatchPut, kBatchFetch, kLocalBatchFetch, kLocalBatchPut}) {
    cases[c] = CountingServerCpu(cases[c], env.tensord_pid, server_cpu[c]);
  }
  const RepeatPolicy policy = env.config.batch_policy(count);
  TENSORD_ASSIGN_OR_RETURN(std::vector<std::vector<double>> samples,
                           RepeatInterleaved(policy, cases));

  const std::string runs = absl::StrCat("median of ", samples[kRaw].size());
  const std::string calls_per_sample =
      count == 1 ? "1 call" : absl::StrCat(count, " calls back to back");
  const std::string of_batch = absl::StrCat(count, " x ", FormatBytes(bytes));
  auto rate = [&](Case c) { return count / Median(samples[c]); };
  const double raw_gbps = GigabytesPerSecond(total, Median(samples[kRaw]));
  const double empty_rate = rate(kEmpty);
  env.report.Add({.section = kBaselineSection,
                  .name = "raw TCP 127.0.0.1, 1 MiB send/recv",
                  .bytes = total,
                  .value = raw_gbps,
                  .unit = "GB/s",
                  .note = absl::StrCat(runs, "; the bytes of ", of_batch,
                                       " tensors, in the batch section's rounds")});
  env.report.Add(
      {.section = kBaselineSection,
       .name = absl::StrCat("empty unary call, ", of_batch, " rounds"),
       .value = empty_rate,
       .unit = "ops/s",
       .note = absl::StrCat(runs, "; ", calls_per_sample,
                            " per sample on one channel, in the batch section's rounds")});

  struct Kind {
    const char* label;
    const char* batch_call;
    const char* single_call;
    Case batch;
    Case single;
    std::string batch_note;
    std::string single_note;
    bool remote;
  };
  const bool target_size = bytes == kTargetTensorBytes;
  std::string local_batch_note = absl::StrCat("path taken: ", local_batch_path.path());
  if (target_size && count == kLocalTargetCount) {
    absl::StrAppend(&local_batch_note,
                    "; issue target: 1024 cached 4 KiB tensors in one handoff round trip");
  }
  const Kind kinds[] = {
      {"put", "BatchPut", "Put", kBatchPut, kSinglePut,
       "kRemote client; new versions; items <= 64 KiB travel many per message",
       "kRemote client; new versions", true},
      {"fetch", "BatchFetch", "Fetch", kBatchFetch, kSingleFetch,
       "kRemote client; one cut of the latest versions", "kRemote client; latest versions", true},
      {"local fetch", "BatchFetch", "Fetch", kLocalBatchFetch, kLocalSingleFetch, local_batch_note,
       absl::StrCat("path taken: ", local_single_path.path(),
                    "; latest version, not held: a round trip each"),
       false},
      {"local put", "BatchPut", "Put", kLocalBatchPut, kLocalSinglePut,
       "kLocal client: put_many requests of 64 then 256 items, two in flight (the bytes in a "
       "memfd, copied by the server)",
       "kLocal client: create, copy, seal (two round trips each)", false}};
  for (const Kind& kind : kinds) {
    const std::string batch_name = absl::StrCat(kind.label, ", ", kind.batch_call, " of ", count);
    const std::string single_name = absl::StrCat(kind.label, ", ", count, " x ", kind.single_call);
    const double batch_rate = rate(kind.batch);
    const double single_rate = rate(kind.single);
    const bool targeted = kind.remote && target_size && count > 1;
    env.report.Add(
        {.section = kBatchSection,
         .name = batch_name,
         .bytes = bytes,
         .value = batch_rate,
         .unit = "tensors/s",
         .ratio = batch_rate / single_rate,
         .baseline = absl::StrCat(count, " x ", kind.single_call, kind.remote ? "" : " (local)"),
         .target =
             targeted ? std::optional(Target::ValueAtLeast(kTargetTensorsPerSecond)) : std::nullopt,
         .note = absl::StrCat(runs, "; ", kind.batch_note)});
    env.report.Add({.section = kBatchSection,
                    .name = batch_name,
                    .bytes = bytes,
                    .value = GigabytesPerSecond(total, Median(samples[kind.batch])),
                    .unit = "GB/s",
                    .ratio = GigabytesPerSecond(total, Median(samples[kind.batch])) / raw_gbps,
                    .baseline = kRawTcp,
                    .note = absl::StrCat(runs, "; ", FormatBytes(total), " in all")});
    // Whether the server is what a batch waits on: on a CPU for most of
    // the call's time, its time a tensor is what must shrink. Over the
    // calls after the warm-ups, as the rows above count them.
    const ServerCpu& cpu = server_cpu[kind.batch];
    std::vector<double> cpu_s;
    std::vector<double> busy;
    for (size_t i = static_cast<size_t>(policy.warmup); i < cpu.cpu_s.size(); ++i) {
      cpu_s.push_back(cpu.cpu_s[i]);
      busy.push_back(cpu.cpu_s[i] / cpu.timed_s[i]);
    }
    env.report.Add({.section = kBatchSection,
                    .name = absl::StrCat(batch_name, ", server CPU a tensor"),
                    .bytes = bytes,
                    .value = Median(cpu_s) * 1e6 / count,
                    .unit = "us",
                    .ratio = Median(busy),
                    .baseline = "the call's own time",
                    .note = absl::StrCat(runs,
                                         " calls; tensord's threads from before a call to "
                                         "after it; above 1x where several ran at once")});
    env.report.Add({.section = kBatchSection,
                    .name = single_name,
                    .bytes = bytes,
                    .value = single_rate,
                    .unit = "tensors/s",
                    .ratio = single_rate / empty_rate,
                    .baseline = "empty call rate",
                    .note = absl::StrCat(runs, "; ", kind.single_note)});
  }
  if (count > 1) {
    for (const auto& [batch, whole, label, client, how] :
         {std::tuple(kBatchPut, kWholePut, "put", "kRemote client", "one stream"),
          std::tuple(kLocalBatchPut, kLocalWholePut, "local put", "kLocal client",
                     "create/copy/seal")}) {
      const double batch_gbps = GigabytesPerSecond(total, Median(samples[batch]));
      env.report.Add(
          {.section = kBatchSection,
           .name = absl::StrCat(label, ", BatchPut of ", count, " vs one Put"),
           .bytes = bytes,
           .value = batch_gbps,
           .unit = "GB/s",
           .ratio = batch_gbps / GigabytesPerSecond(total, Median(samples[whole])),
           .baseline = absl::StrCat("one Put of all ", FormatBytes(total)),
           .note = absl::StrCat(runs, "; ", client, "; the same bytes as one tensor (", how,
                                "): a reference for what the items' own work "
                                "costs")});
    }
  }
  const double dropped_rate = rate(kLocalBatchFetchAndDrop);
  env.report.Add({.section = kBatchSection,
                  .name = absl::StrCat("local fetch, BatchFetch of ", count, " then drop"),
                  .bytes = bytes,
                  .value = dropped_rate,
                  .unit = "tensors/s",
                  .ratio = dropped_rate / rate(kLocalBatchFetch),
                  .baseline = "the same BatchFetch, result kept",
                  .note = absl::StrCat(runs, "; 4 batches back to back per sample, each dropped ",
                                       "before the next: a loop's cost, lease ends included")});
  // The remote loops against raw TCP of the same bytes: the issue's
  // "half the wire" read as a writer's or reader's steady state.
  for (const auto& [c, label, after, note] :
       {std::tuple(kBatchFetchAndDrop, "fetch, BatchFetch of ", " then drop",
                   "4 batches back to back per sample, each dropped before the next"),
        std::tuple(kBatchPutBackToBack, "put, BatchPut of ", ", back to back",
                   "4 batches back to back per sample, new versions")}) {
    const double seconds = Median(samples[c]);
    env.report.Add({.section = kBatchSection,
                    .name = absl::StrCat(label, count, after),
                    .bytes = bytes,
                    .value = count / seconds,
                    .unit = "tensors/s",
                    .ratio = GigabytesPerSecond(total, seconds) / raw_gbps,
                    .baseline = kRawTcp,
                    .note = absl::StrCat(runs, "; kRemote client; ", note)});
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunBatchSection(const BenchEnv& env) {
  const BenchConfig& config = env.config;
  if (config.batch_counts.empty() || config.batch_tensor_sizes.empty()) return absl::OkStatus();
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> remote,
                           ConnectClient(env, TransferPath::kRemote));
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> local, ConnectClient(env, TransferPath::kLocal));
  if (!local->local()) {
    return absl::UnavailableError(
        "local handoff is not reachable although the benchmark's "
        "tensord has a handoff socket");
  }
  TENSORD_ASSIGN_OR_RETURN(Operation empty_call, MakeEmptyCall(env.empty_target));
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<RawTcpLink> link,
                           RawTcpLink::Open(env.source, env.destination));
  const BatchPeers peers{*remote, *local, empty_call, *link};
  const int most = *std::max_element(config.batch_counts.begin(), config.batch_counts.end());

  for (uint64_t bytes : config.batch_tensor_sizes) {
    TENSORD_ASSIGN_OR_RETURN(const BatchTensors tensors, MakeTensors(bytes, most));
    // What the fetches read: stored once, evictable like a cache's tensors.
    std::vector<BatchPutItem> fetch_set;
    for (int i = 0; i < most; ++i) {
      fetch_set.push_back({.name = ItemName("fetch", bytes, i),
                           .tensor = ByteTensor(tensors.data(i), &tensors.shape),
                           .retention = Retention::kCache});
    }
    TENSORD_ASSIGN_OR_RETURN(BatchPutResult stored, remote->BatchPut(fetch_set));
    TENSORD_RETURN_IF_ERROR(
        CheckItemsStored(stored.items, tensors, fetch_set.size(), "fetch set put"));

    for (int count : config.batch_counts) {
      TENSORD_RETURN_IF_ERROR(MeasureBatch(env, peers, tensors, count));
    }
    for (int i = 0; i < most; ++i) {
      TENSORD_RETURN_IF_ERROR(remote->Delete(ItemName("fetch", bytes, i)).status());
      TENSORD_RETURN_IF_ERROR(remote->Delete(ItemName("put", bytes, i)).status());
    }
    for (int count : config.batch_counts) {
      if (count > 1) {
        TENSORD_RETURN_IF_ERROR(remote->Delete(ItemName("whole", bytes, count)).status());
      }
    }
  }
  TENSORD_RETURN_IF_ERROR(RunBatchScaleRows(env, *remote, *local, *link));
  return RunRegistryFloorRows(env);
}

}  // namespace tensord::bench
