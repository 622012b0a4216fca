// The cluster section's rows that need a cluster of their own:
//   - failover: a read through a node that holds no copy, of a name whose
//     first holder is paused (SIGSTOP) and whose replica lives, against
//     the same read with every holder live;
//   - join: a node joining a cluster of cluster_join_names durable names
//     (put on one node by BatchPut from four clients): how long until it
//     serves, how long it takes to list them all, and each node's memory
//     per name (the holder, a node holding none, the joined one).
// Both run with tensord's default cluster flags (a 5 s lease TTL).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_cluster.h"
#include "bench/cases.h"
#include "bench/proc_stats.h"
#include "service/common/mutex.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

constexpr int kNodes = 3;
// tensord's default --etcd-lease-ttl.
constexpr double kLeaseTtlSeconds = 5;
constexpr int64_t kJoinTensorBytes = 64;
constexpr size_t kJoinBatchItems = 1000;
constexpr int kJoinClients = 4;

absl::StatusOr<std::vector<std::unique_ptr<Client>>> ConnectAll(BenchCluster& cluster) {
  std::vector<std::unique_ptr<Client>> clients;
  for (size_t i = 0; i < cluster.size(); ++i) {
    TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, ConnectTo(cluster.target(i)));
    clients.push_back(std::move(client));
  }
  TENSORD_RETURN_IF_ERROR(AwaitMembers(clients, cluster.size()));
  return clients;
}

// Which node, other than node 0, holds `name` (the replica of a replicas=2
// put on node 0), and the one that does not: the reader.
absl::StatusOr<size_t> NodeHoldingNoCopy(const std::vector<std::unique_ptr<Client>>& nodes,
                                         const std::string& name) {
  std::vector<size_t> without;
  for (size_t i = 1; i < nodes.size(); ++i) {
    TENSORD_ASSIGN_OR_RETURN(std::vector<TensorInfo> held, nodes[i]->ListAll(name));
    if (held.empty() || held.front().name != name) without.push_back(i);
  }
  if (without.size() != 1) {
    return absl::DataLossError(absl::StrCat("a replicas=2 put of ", name, " is held by ",
                                            nodes.size() - without.size(), " nodes"));
  }
  return without.front();
}

double Millis(double seconds) { return seconds * 1e3; }

uint64_t AnonBytes(pid_t pid) {
  absl::StatusOr<ResidentMemory> memory = ReadResidentMemory(pid);
  return memory.ok() ? memory->rss_anon : 0;
}

double BytesPerName(uint64_t before, uint64_t after, uint64_t names) {
  return after > before ? static_cast<double>(after - before) / static_cast<double>(names) : 0.0;
}

// `count` names of kJoinTensorBytes put on `target` in batches from
// kJoinClients clients; the seconds it took.
absl::StatusOr<double> PutNames(const std::string& target, uint64_t count) {
  std::atomic<bool> failed{false};
  absl::Status first_error;
  Mutex error_mu;
  const std::vector<uint8_t> bytes(kJoinTensorBytes, 0x5a);
  const int64_t shape = kJoinTensorBytes;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kJoinClients; ++c) {
    clients.emplace_back([&, c] {
      auto fail = [&](absl::Status status) {
        MutexLock lock(&error_mu);
        if (first_error.ok()) first_error = std::move(status);
        failed.store(true);
      };
      absl::StatusOr<std::unique_ptr<Client>> client = ConnectTo(target);
      if (!client.ok()) return fail(client.status());
      const uint64_t batches = (count + kJoinBatchItems - 1) / kJoinBatchItems;
      for (uint64_t batch = c; batch < batches && !failed.load(); batch += kJoinClients) {
        std::vector<BatchPutItem> items;
        for (uint64_t i = batch * kJoinBatchItems;
             i < std::min(count, (batch + 1) * kJoinBatchItems); ++i) {
          items.push_back(BatchPutItem{.name = absl::StrCat("join/", i),
                                       .tensor = ByteTensor(bytes.data(), &shape)});
        }
        absl::StatusOr<BatchPutResult> put = (*client)->BatchPut(items);
        if (!put.ok()) return fail(put.status());
        for (const absl::StatusOr<TensorInfo>& item : put->items) {
          if (!item.ok()) return fail(item.status());
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  if (failed.load()) return first_error;
  return SecondsSince(start);
}

}  // namespace

absl::Status RunClusterFailoverRows(const BenchEnv& env) {
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster, BenchCluster::Start(env, kNodes));
  TENSORD_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Client>> nodes, ConnectAll(*cluster));
  const uint64_t bytes = env.config.cluster_small_bytes;
  const int64_t shape = static_cast<int64_t>(bytes);
  std::vector<double> live;
  std::vector<double> paused;
  PutOptions two;
  two.replicas = 2;
  for (int round = 0; round < env.config.cluster_failover_rounds; ++round) {
    const std::string live_name = absl::StrCat("cluster/failover-live/", round);
    const std::string paused_name = absl::StrCat("cluster/failover-paused/", round);
    for (const std::string& name : {live_name, paused_name}) {
      TENSORD_RETURN_IF_ERROR(
          nodes[0]->Put(name, ByteTensor(env.source.data(), &shape), two).status());
    }
    TENSORD_ASSIGN_OR_RETURN(size_t live_reader, NodeHoldingNoCopy(nodes, live_name));
    TENSORD_ASSIGN_OR_RETURN(size_t paused_reader, NodeHoldingNoCopy(nodes, paused_name));
    Clock::time_point start = Clock::now();
    TENSORD_ASSIGN_OR_RETURN(Tensor fetched, nodes[live_reader]->Fetch(live_name));
    live.push_back(SecondsSince(start));
    TENSORD_RETURN_IF_ERROR(CheckFetched(fetched, bytes, "read with every holder live"));
    // The first holder stops answering; its replica still lives.
    cluster->Pause(0);
    start = Clock::now();
    absl::StatusOr<Tensor> failed_over = nodes[paused_reader]->Fetch(paused_name);
    paused.push_back(SecondsSince(start));
    cluster->Resume(0);
    if (!failed_over.ok()) {
      return cluster->WithDeaths(absl::Status(
          failed_over.status().code(),
          absl::StrCat("read of ", paused_name,
                       " with its first holder paused: ", failed_over.status().message())));
    }
    TENSORD_RETURN_IF_ERROR(CheckFetched(*failed_over, bytes, "read with the holder paused"));
    // The paused node lost its lease; it joins again before the next round.
    TENSORD_RETURN_IF_ERROR(cluster->WithDeaths(AwaitMembers(nodes, kNodes)));
    for (const std::string& name : {live_name, paused_name}) {
      TENSORD_RETURN_IF_ERROR(nodes[1]->Delete(name).status());
    }
  }
  const std::string runs = absl::StrCat("median of ", paused.size());
  env.report.Add({.section = kClusterSection,
                  .name = "read via a node without a copy, holders live",
                  .bytes = bytes,
                  .value = Millis(Median(live)),
                  .unit = "ms",
                  .note = absl::StrCat(runs,
                                       "; replicas=2 put on node a; the reader's node "
                                       "pulls from a holder")});
  env.report.Add(
      {.section = kClusterSection,
       .name = "read failover, first holder paused",
       .bytes = bytes,
       .value = Millis(Median(paused)),
       .unit = "ms",
       .target = Target::ValueAtMost(Millis(kLeaseTtlSeconds + 2)),
       .note = absl::StrCat(runs,
                            "; node a SIGSTOPped just before the read, the "
                            "replica on another node live; target: the lease TTL "
                            "(5 s, default) + 2 s; slowest ",
                            absl::StrFormat("%.0f", Millis(Percentile(paused, 100))), " ms")});
  return absl::OkStatus();
}

absl::Status RunClusterJoinRows(const BenchEnv& env) {
  const uint64_t count = env.config.cluster_join_names;
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster, BenchCluster::Start(env, kNodes));
  TENSORD_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Client>> nodes, ConnectAll(*cluster));
  const uint64_t holder_before = AnonBytes(cluster->pid(0));
  const uint64_t other_before = AnonBytes(cluster->pid(1));
  absl::StatusOr<double> put_seconds = PutNames(cluster->target(0), count);
  TENSORD_RETURN_IF_ERROR(cluster->WithDeaths(put_seconds.status()));
  const uint64_t holder_after = AnonBytes(cluster->pid(0));
  const uint64_t other_after = AnonBytes(cluster->pid(1));
  std::fprintf(stderr, "tensord-bench: %llu names put on node a in %.1f s\n",
               static_cast<unsigned long long>(count), *put_seconds);

  const Clock::time_point join_start = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(size_t joined, cluster->AddNode("d"));
  const double join_seconds = SecondsSince(join_start);
  const uint64_t joined_before = AnonBytes(cluster->pid(joined));
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> d, ConnectTo(cluster->target(joined)));
  const Clock::time_point list_start = Clock::now();
  uint64_t listed = 0;
  std::string token;
  do {
    TENSORD_ASSIGN_OR_RETURN(ListResult page, d->ListCluster("join/", 1000, token));
    listed += page.tensors.size();
    token = page.next_page_token;
  } while (!token.empty());
  const double list_seconds = SecondsSince(list_start);
  if (listed != count) {
    return absl::DataLossError(
        absl::StrCat("the joined node lists ", listed, " of ", count, " names"));
  }
  const uint64_t joined_after = AnonBytes(cluster->pid(joined));

  const std::string names = absl::StrCat(count, " names of ", kJoinTensorBytes, " bytes");
  env.report.Add({.section = kClusterSection,
                  .name = "BatchPut into a cluster node (durable)",
                  .value = static_cast<double>(count) / *put_seconds,
                  .unit = "names/s",
                  .note = absl::StrCat(names, "; ", kJoinClients, " clients, ", kJoinBatchItems,
                                       " a call; the cluster the next rows join")});
  env.report.Add({.section = kClusterSection,
                  .name = "node joins, serving",
                  .value = join_seconds,
                  .unit = "s",
                  .target = Target::ValueAtMost(5),
                  .note = absl::StrCat("start to ready file, with ", names,
                                       " in the cluster (it reads none of them to join)")});
  env.report.Add({.section = kClusterSection,
                  .name = "joined node lists every name",
                  .value = static_cast<double>(count) / list_seconds,
                  .unit = "names/s",
                  .note = absl::StrFormat("ListCluster pages of 1000, each a bounded etcd range; "
                                          "all in %.1f s",
                                          list_seconds)});
  for (auto [label, before, after, note] :
       {std::tuple{"memory per name, holder", holder_before, holder_after,
                   "RssAnon growth of node a over the puts, beyond the tensors' own pages"},
        std::tuple{"memory per name, node holding none", other_before, other_after,
                   "RssAnon growth of node b over the same puts"},
        std::tuple{"memory per name, joined node", joined_before, joined_after,
                   "RssAnon growth of node d from ready to having listed every name"}}) {
    env.report.Add({.section = kClusterSection,
                    .name = label,
                    .value = BytesPerName(before, after, count),
                    .unit = "bytes",
                    .note = absl::StrCat(note, "; ", names)});
  }
  return absl::OkStatus();
}

}  // namespace tensord::bench
