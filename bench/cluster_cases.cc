// The cluster section (opt-in: --sections cluster): a real etcd
// (/usr/bin/etcd, Debian's etcd-server) and three tensord nodes of its own
// on 127.0.0.1, each started and stopped by pid, and rows against baselines
// measured in the same rounds:
//   - read-through: a tensor put on node a, fetched through node b by a
//     first reader (b pulls it from a, passing the bytes on as they
//     arrive) and a second one (b's copy), against a direct fetch from a,
//     in GB/s and in time to the first bytes. Every round puts a new name
//     and deletes it afterwards, so every first reader really pulls;
//   - puts: replicas=2 against replicas=1 on the same cluster node, and
//     replicas=1 on a cluster node against the bench's single tensord;
//   - a cache-retention put on a cluster node against the single tensord;
//   - BatchPut of small tensors, durable and cache, against the single
//     tensord;
//   - the latest-version check on a small fetch: a local hit on a cluster
//     node (one linearizable etcd read) against the same fetch from the
//     bench's single (non-cluster) tensord, and a first read on another
//     node (the pull) against the local hit;
//   - failover with the holder paused, and a node joining a cluster of a
//     million names (cluster_scale_cases.cc).
// Without /usr/bin/etcd the section reports one "skipped" row.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/baselines.h"
#include "bench/bench_cluster.h"
#include "bench/cases.h"
#include "bench/proc_stats.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

constexpr int kNodes = 3;

double Micros(double seconds) { return seconds * 1e6; }

std::string Spread(const std::vector<double>& samples) {
  return absl::StrFormat("median of %d, p99 %.1f us", samples.size(),
                         Micros(Percentile(samples, 99)));
}

// Puts the first `bytes` of env.source as `name` through `client`, checks
// what the server says it stored, and returns the seconds of the Put call.
absl::StatusOr<double> TimedPut(const BenchEnv& env, Client& client, const std::string& name,
                                uint64_t bytes, uint32_t replicas,
                                Retention retention = Retention::kDefault) {
  const int64_t shape = static_cast<int64_t>(bytes);
  PutOptions options;
  options.replicas = replicas;
  options.retention = retention;
  const Clock::time_point start = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(TensorInfo info,
                           client.Put(name, ByteTensor(env.source.data(), &shape), options));
  const double seconds = SecondsSince(start);
  if (info.name != name || info.total_bytes != bytes) {
    return absl::DataLossError(absl::StrCat("put of ", bytes, " bytes as '", name, "' stored '",
                                            info.name, "' with ", info.total_bytes, " bytes"));
  }
  return seconds;
}

// A Fetch timed up to the returned tensor; the check and the release are not.
absl::StatusOr<double> TimedFetch(Client& client, const std::string& name, uint64_t bytes,
                                  const std::string& what) {
  const Clock::time_point start = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(Tensor tensor, client.Fetch(name));
  const double seconds = SecondsSince(start);
  TENSORD_RETURN_IF_ERROR(CheckFetched(tensor, bytes, absl::StrCat(what, " of ", name)));
  return seconds;
}

// A FetchInto options whose progress notes when the first bytes came.
struct FirstBytes {
  FetchOptions options;
  Clock::time_point at;
  bool seen = false;
  FirstBytes() {
    options.progress = [this](uint64_t done, uint64_t) {
      if (done > 0 && !seen) {
        seen = true;
        at = Clock::now();
      }
    };
  }
  FirstBytes(const FirstBytes&) = delete;
  FirstBytes& operator=(const FirstBytes&) = delete;
};

// A FetchInto timed, and the seconds to its first bytes added to `first`.
absl::StatusOr<double> TimedFetchIntoNotingFirstBytes(const BenchEnv& env, Client& client,
                                                      const std::string& name, uint64_t bytes,
                                                      std::vector<double>& first) {
  FirstBytes watch;
  const Clock::time_point start = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(double seconds,
                           TimedFetchInto(env, client, name, bytes, start, watch.options));
  if (watch.seen) first.push_back(std::chrono::duration<double>(watch.at - start).count());
  return seconds;
}

// The read-through rows: a put on node a, fetched from a, then through b
// twice. FetchInto a pre-faulted buffer, so the rows compare transfers.
absl::Status ReadThroughRows(const BenchEnv& env, Client& a, Client& b) {
  const uint64_t bytes = env.config.cluster_large_bytes;
  int round = 0;
  std::string name;
  enum Case { kDirect, kFirst, kSecond, kNewMemory };
  std::vector<double> direct_first_bytes;
  std::vector<double> pulled_first_bytes;
  const std::vector<TimedRun> cases = {
      [&]() -> absl::StatusOr<double> {
        name = absl::StrCat(TensorName("cluster/pull", bytes), "/", round++);
        TENSORD_RETURN_IF_ERROR(TimedPut(env, a, name, bytes, 1).status());
        ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
        return TimedFetchIntoNotingFirstBytes(env, a, name, bytes, direct_first_bytes);
      },
      [&] {
        ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
        return TimedFetchIntoNotingFirstBytes(env, b, name, bytes, pulled_first_bytes);
      },
      [&]() -> absl::StatusOr<double> {
        ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
        TENSORD_ASSIGN_OR_RETURN(double seconds, TimedFetchInto(env, b, name, bytes));
        // b's copy must be its own now (its listing never pulls).
        TENSORD_ASSIGN_OR_RETURN(std::vector<TensorInfo> held, b.ListAll(name));
        if (held.empty() || held.front().name != name) {
          return absl::DataLossError(
              absl::StrCat("node b served ", name, " but does not list a copy of it"));
        }
        // Deleting on any node removes the name from every node.
        TENSORD_RETURN_IF_ERROR(b.Delete(name).status());
        return seconds;
      },
      [&] { return TimeFirstTouch(bytes); }};
  TENSORD_ASSIGN_OR_RETURN(std::vector<std::vector<double>> samples,
                           RepeatInterleaved(env.config.cluster_large_policy, cases));
  const std::string runs = absl::StrCat("median of ", samples[kDirect].size());
  const double direct = GigabytesPerSecond(bytes, Median(samples[kDirect]));
  const std::string baseline = "fetch from the holder";
  env.report.Add({.section = kBaselineSection,
                  .name = "first write of new memory (mmap)",
                  .bytes = bytes,
                  .value = GigabytesPerSecond(bytes, Median(samples[kNewMemory])),
                  .unit = "GB/s",
                  .note = absl::StrCat(runs,
                                       "; in the cluster section's rounds: what node b's "
                                       "copy of a pulled tensor pays for new memory")});
  env.report.Add({.section = kClusterSection,
                  .name = "fetch from the holder (node a)",
                  .bytes = bytes,
                  .value = direct,
                  .unit = "GB/s",
                  .note = absl::StrCat(runs,
                                       "; FetchInto a pre-faulted buffer; baseline of "
                                       "the next two rows")});
  if (!direct_first_bytes.empty() && !pulled_first_bytes.empty()) {
    const double direct_ms = Median(direct_first_bytes) * 1e3;
    const double pulled_ms = Median(pulled_first_bytes) * 1e3;
    env.report.Add({.section = kClusterSection,
                    .name = "fetch from the holder, first bytes",
                    .bytes = bytes,
                    .value = direct_ms,
                    .unit = "ms",
                    .note = absl::StrCat("median of ", direct_first_bytes.size(),
                                         "; from the call to the first progress report")});
    env.report.Add({.section = kClusterSection,
                    .name = "fetch via node b, first reader, first bytes",
                    .bytes = bytes,
                    .value = pulled_ms,
                    .unit = "ms",
                    .ratio = pulled_ms / direct_ms,
                    .baseline = "fetch from the holder, first bytes",
                    .note = absl::StrCat("median of ", pulled_first_bytes.size(),
                                         "; b passes a's bytes on as they arrive")});
  }
  for (auto [which, label, note] :
       {std::tuple{kFirst, "fetch via node b, first reader (pull)",
                   "b passes a's version on as it pulls it into new memory; a new name each "
                   "round"},
        std::tuple{kSecond, "fetch via node b, second reader", "served from b's copy"}}) {
    const double gbps = GigabytesPerSecond(bytes, Median(samples[which]));
    env.report.Add({.section = kClusterSection,
                    .name = label,
                    .bytes = bytes,
                    .value = gbps,
                    .unit = "GB/s",
                    .ratio = gbps / direct,
                    .baseline = baseline,
                    .note = absl::StrCat(runs, "; ", note)});
  }
  return absl::OkStatus();
}

// Puts of `bytes`: the bench's single tensord against a cluster node with
// one copy, then that against the same node with two (acknowledged once a
// second node holds it). Two pairs in rounds of their own: a server that
// sits out most of a round answers its next call slower (its threads have
// gone idle), so each pair alternates just its two cases.
absl::Status PutRows(const BenchEnv& env, Client& single, Client& a,
                     const std::vector<std::unique_ptr<Client>>& nodes, uint64_t bytes,
                     const RepeatPolicy& policy) {
  const std::string single_name = TensorName("cluster/put-single", bytes);
  const std::string one_name = TensorName("cluster/put-1", bytes);
  const std::string two_name = TensorName("cluster/put-2", bytes);
  // The previous version is deleted first (untimed), so each put writes
  // into memory its node has just freed: on VMs that hand freed memory back
  // to the host, memory freed seconds earlier is several times slower to
  // write (bench/README.md), which would otherwise favour whichever node
  // freed memory last.
  const std::string cache_name = TensorName("cluster/put-cache", bytes);
  auto put_after_delete = [&](Client& client, const std::string& name, uint32_t replicas,
                              Retention retention = Retention::kDefault) -> absl::StatusOr<double> {
    if (absl::StatusOr<uint64_t> removed = client.Delete(name);
        !removed.ok() && !absl::IsNotFound(removed.status())) {
      return removed.status();
    }
    return TimedPut(env, client, name, bytes, replicas, retention);
  };
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> single_vs_one,
      RepeatInterleaved(policy, {[&] { return put_after_delete(single, single_name, 0); },
                                 [&] { return put_after_delete(a, one_name, 1); }}));
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> one_vs_two,
      RepeatInterleaved(policy, {[&] { return put_after_delete(a, one_name, 1); },
                                 [&] { return put_after_delete(a, two_name, 2); }}));
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> single_vs_cache,
      RepeatInterleaved(policy,
                        {[&] { return put_after_delete(single, single_name, 0); },
                         [&] { return put_after_delete(a, cache_name, 1, Retention::kCache); }}));
  // Two nodes hold the replicated name, as their own listings say.
  int holders = 0;
  for (const std::unique_ptr<Client>& node : nodes) {
    TENSORD_ASSIGN_OR_RETURN(std::vector<TensorInfo> held, node->ListAll(two_name));
    if (!held.empty() && held.front().name == two_name) ++holders;
  }
  if (holders != 2) {
    return absl::DataLossError(
        absl::StrCat("a put with replicas=2 of ", two_name, " is held by ", holders, " nodes"));
  }
  TENSORD_RETURN_IF_ERROR(single.Delete(single_name).status());
  TENSORD_RETURN_IF_ERROR(a.Delete(one_name).status());
  TENSORD_RETURN_IF_ERROR(a.Delete(two_name).status());
  TENSORD_RETURN_IF_ERROR(a.Delete(cache_name).status());

  // Large puts in GB/s (higher is better), small ones in us (lower is better).
  const bool large = bytes >= (uint64_t{1} << 20);
  auto value = [&](const std::vector<double>& samples) {
    return large ? GigabytesPerSecond(bytes, Median(samples)) : Micros(Median(samples));
  };
  auto spread = [&](const std::vector<double>& samples) {
    return large ? absl::StrCat("median of ", samples.size()) : Spread(samples);
  };
  const std::string unit = large ? "GB/s" : "us";
  const double single_value = value(single_vs_one[0]);
  const double one_value = value(single_vs_one[1]);
  const double one_again = value(one_vs_two[0]);
  const double two_value = value(one_vs_two[1]);
  env.report.Add({.section = kClusterSection,
                  .name = "put, single node (no cluster)",
                  .bytes = bytes,
                  .value = single_value,
                  .unit = unit,
                  .note = absl::StrCat(spread(single_vs_one[0]),
                                       "; the bench's own tensord; the previous version deleted "
                                       "just before")});
  env.report.Add(
      {.section = kClusterSection,
       .name = "put, cluster node, replicas=1",
       .bytes = bytes,
       .value = one_value,
       .unit = unit,
       .ratio = one_value / single_value,
       .baseline = "put, single node",
       .note = absl::StrCat(spread(single_vs_one[1]), "; acknowledged once registered in etcd")});
  env.report.Add({.section = kClusterSection,
                  .name = "put, cluster node, replicas=2",
                  .bytes = bytes,
                  .value = two_value,
                  .unit = unit,
                  .ratio = two_value / one_again,
                  .baseline = "put, replicas=1",
                  .note = absl::StrCat(spread(one_vs_two[1]),
                                       "; acknowledged once a second node pulled and registered "
                                       "its copy; replicas=1 in these rounds: ",
                                       FormatValue(one_again), " ", unit)});
  const double single_again = value(single_vs_cache[0]);
  const double cache_value = value(single_vs_cache[1]);
  // Lower is better for us, higher for GB/s: the target bounds the cost.
  env.report.Add({.section = kClusterSection,
                  .name = "put, cluster node, cache retention",
                  .bytes = bytes,
                  .value = cache_value,
                  .unit = unit,
                  .ratio = cache_value / single_again,
                  .baseline = "put, single node",
                  .target = large ? Target::RatioAtLeast(1 / 1.5) : Target::RatioAtMost(1.5),
                  .note = absl::StrCat(spread(single_vs_cache[1]),
                                       "; no etcd write (announced to the name's home node); "
                                       "single node in these rounds: ",
                                       FormatValue(single_again), " ", unit)});
  return absl::OkStatus();
}

// BatchPut of `count` small tensors: the bench's single tensord against a
// cluster node, with durable names (registered in shared etcd
// transactions) and with cache retention (no etcd write). Each round puts
// new names and deletes them afterwards (untimed).
absl::Status BatchPutRows(const BenchEnv& env, BenchCluster& cluster, Client& single, Client& a) {
  const uint64_t bytes = env.config.cluster_small_bytes;
  const int count = env.config.cluster_batch_count;
  const int64_t shape = static_cast<int64_t>(bytes);
  // CPU seconds each process spends in the durable calls: where a durable
  // batch's time goes on a machine whose cores etcd and the nodes share.
  std::vector<pid_t> pids = {cluster.etcd_pid(), env.tensord_pid};
  for (size_t i = 0; i < cluster.size(); ++i) pids.push_back(cluster.pid(i));
  auto cpu_now = [&] {
    std::vector<double> seconds;
    for (pid_t pid : pids) {
      absl::StatusOr<double> cpu = ReadCpuSeconds(pid);
      seconds.push_back(cpu.ok() ? *cpu : 0.0);
    }
    return seconds;
  };
  std::vector<double> cpu_single(pids.size(), 0.0);
  std::vector<double> cpu_durable(pids.size(), 0.0);
  std::vector<double> cpu_cache_single(pids.size(), 0.0);
  std::vector<double> cpu_cache(pids.size(), 0.0);
  int calls_single = 0;
  int calls_durable = 0;
  int calls_cache_single = 0;
  int calls_cache = 0;
  int round = 0;
  auto batch_put = [&](Client& client, const std::string& kind, Retention retention,
                       std::vector<double>* cpu = nullptr,
                       int* calls = nullptr) -> absl::StatusOr<double> {
    const std::string prefix = absl::StrCat("cluster/batch-", kind, "/", round++, "/");
    std::vector<BatchPutItem> items;
    items.reserve(count);
    for (int i = 0; i < count; ++i) {
      items.push_back(BatchPutItem{.name = absl::StrCat(prefix, i),
                                   .tensor = ByteTensor(env.source.data(), &shape),
                                   .retention = retention});
    }
    const std::vector<double> cpu_before = cpu != nullptr ? cpu_now() : std::vector<double>();
    const Clock::time_point start = Clock::now();
    TENSORD_ASSIGN_OR_RETURN(BatchPutResult result, client.BatchPut(items));
    const double seconds = SecondsSince(start);
    if (cpu != nullptr) {
      const std::vector<double> cpu_after = cpu_now();
      for (size_t i = 0; i < pids.size(); ++i) (*cpu)[i] += cpu_after[i] - cpu_before[i];
      ++*calls;
    }
    for (const absl::StatusOr<TensorInfo>& item : result.items) {
      if (!item.ok()) return item.status();
    }
    for (const BatchPutItem& item : items)
      TENSORD_RETURN_IF_ERROR(client.Delete(item.name).status());
    return seconds;
  };
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> durable,
      RepeatInterleaved(
          env.config.cluster_batch_policy,
          {[&] {
             return batch_put(single, "single", Retention::kDefault, &cpu_single, &calls_single);
           },
           [&] {
             return batch_put(a, "durable", Retention::kDefault, &cpu_durable, &calls_durable);
           }}));
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> cache,
      RepeatInterleaved(
          env.config.cluster_batch_policy,
          {[&] {
             return batch_put(single, "single", Retention::kDefault, &cpu_cache_single,
                              &calls_cache_single);
           },
           [&] { return batch_put(a, "cache", Retention::kCache, &cpu_cache, &calls_cache); }}));
  // CPU ms per 1000 tensors, from /proc (10 ms ticks: summed over every call).
  auto per_thousand = [&](double seconds, int calls) {
    return calls == 0 ? 0.0 : seconds * 1e3 * 1000.0 / (static_cast<double>(calls) * count);
  };
  // Where a cluster batch's time goes on a machine whose cores etcd and
  // the nodes share, against the single node's in the same rounds.
  auto cpu_note_for = [&](const std::vector<double>& cluster_cpu, int cluster_calls,
                          const std::vector<double>& single_cpu, int single_calls) {
    double other_nodes = 0;
    for (size_t i = 3; i < pids.size(); ++i) other_nodes += cluster_cpu[i];
    return absl::StrFormat(
        "CPU ms per 1000 tensors: etcd %.0f, node a %.0f, the other nodes %.0f (single node: "
        "%.0f)",
        per_thousand(cluster_cpu[0], cluster_calls), per_thousand(cluster_cpu[2], cluster_calls),
        per_thousand(other_nodes, cluster_calls), per_thousand(single_cpu[1], single_calls));
  };
  const std::string cpu_note = cpu_note_for(cpu_durable, calls_durable, cpu_single, calls_single);
  auto rate = [&](const std::vector<double>& samples) { return count / Median(samples); };
  const std::string runs = absl::StrCat("median of ", durable[0].size(), "; ", count,
                                        " tensors a call, new names each round");
  env.report.Add({.section = kClusterSection,
                  .name = "BatchPut, single node (no cluster)",
                  .bytes = bytes,
                  .value = rate(durable[0]),
                  .unit = "tensors/s",
                  .note = runs});
  env.report.Add(
      {.section = kClusterSection,
       .name = "BatchPut, cluster node, durable",
       .bytes = bytes,
       .value = rate(durable[1]),
       .unit = "tensors/s",
       .ratio = rate(durable[1]) / rate(durable[0]),
       .baseline = "BatchPut, single node",
       .target = Target::RatioAtLeast(0.8),
       .note = absl::StrCat(runs, "; one etcd record each, in shared transactions; ", cpu_note)});
  env.report.Add({.section = kClusterSection,
                  .name = "BatchPut, cluster node, cache retention",
                  .bytes = bytes,
                  .value = rate(cache[1]),
                  .unit = "tensors/s",
                  .ratio = rate(cache[1]) / rate(cache[0]),
                  .baseline = "BatchPut, single node",
                  .target = Target::RatioAtLeast(0.8),
                  .note = absl::StrCat(
                      "median of ", cache[1].size(),
                      "; no etcd write; single node in these rounds: ", FormatValue(rate(cache[0])),
                      " tensors/s; ",
                      cpu_note_for(cpu_cache, calls_cache, cpu_cache_single, calls_cache_single))});
  return absl::OkStatus();
}

// A small fetch: the bench's single tensord against a local hit on node a,
// then the local hit against a first read through node b (a new name each
// round, deleted after it). Two pairs, as in PutRows.
absl::Status SmallFetchRows(const BenchEnv& env, Client& single, Client& a, Client& b) {
  const uint64_t bytes = env.config.cluster_small_bytes;
  const std::string held = TensorName("cluster/small", bytes);
  TENSORD_RETURN_IF_ERROR(TimedPut(env, single, held, bytes, 0).status());
  TENSORD_RETURN_IF_ERROR(TimedPut(env, a, held, bytes, 1).status());
  int round = 0;
  const TimedRun local_hit = [&] {
    return TimedFetch(a, held, bytes, "local-hit fetch on node a");
  };
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> single_vs_hit,
      RepeatInterleaved(
          env.config.cluster_small_policy,
          {[&] { return TimedFetch(single, held, bytes, "single-node fetch"); }, local_hit}));
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> hit_vs_pull,
      RepeatInterleaved(env.config.cluster_small_policy,
                        {local_hit, [&]() -> absl::StatusOr<double> {
                           const std::string name =
                               absl::StrCat(TensorName("cluster/small-pull", bytes), "/", round++);
                           TENSORD_RETURN_IF_ERROR(TimedPut(env, a, name, bytes, 1).status());
                           TENSORD_ASSIGN_OR_RETURN(
                               double seconds, TimedFetch(b, name, bytes, "pull through node b"));
                           TENSORD_RETURN_IF_ERROR(b.Delete(name).status());
                           return seconds;
                         }}));
  TENSORD_RETURN_IF_ERROR(single.Delete(held).status());
  TENSORD_RETURN_IF_ERROR(a.Delete(held).status());

  const double single_us = Micros(Median(single_vs_hit[0]));
  const double hit_us = Micros(Median(single_vs_hit[1]));
  const double hit_again_us = Micros(Median(hit_vs_pull[0]));
  const double pull_us = Micros(Median(hit_vs_pull[1]));
  env.report.Add({.section = kClusterSection,
                  .name = "fetch, single node (no cluster)",
                  .bytes = bytes,
                  .value = single_us,
                  .unit = "us",
                  .note = absl::StrCat(Spread(single_vs_hit[0]), "; the bench's own tensord")});
  env.report.Add({.section = kClusterSection,
                  .name = "fetch, cluster node, local hit",
                  .bytes = bytes,
                  .value = hit_us,
                  .unit = "us",
                  .ratio = hit_us / single_us,
                  .baseline = "fetch, single node",
                  .note = absl::StrCat(Spread(single_vs_hit[1]),
                                       "; node a holds the latest version (the directory lookup "
                                       "is in memory)")});
  env.report.Add({.section = kClusterSection,
                  .name = "fetch via node b, first read (pull)",
                  .bytes = bytes,
                  .value = pull_us,
                  .unit = "us",
                  .ratio = pull_us / hit_again_us,
                  .baseline = "fetch, local hit",
                  .note = absl::StrCat(Spread(hit_vs_pull[1]),
                                       "; b pulls it from a, then serves it; a new name each "
                                       "round; local hit in these rounds: ",
                                       FormatValue(hit_again_us), " us")});
  return absl::OkStatus();
}

}  // namespace

absl::Status RunClusterSection(const BenchEnv& env) {
  if (access(kEtcdBinary, X_OK) != 0) {
    const std::string why = absl::StrCat(kEtcdBinary,
                                         " not found (Debian's etcd-server; "
                                         "deploy/install-deps.sh installs it)");
    std::fprintf(stderr, "tensord-bench: cluster section skipped: %s\n", why.c_str());
    env.report.Add(
        {.section = kClusterSection, .name = "skipped: no etcd", .unit = "-", .note = why});
    return absl::OkStatus();
  }
  const Clock::time_point begun = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster, BenchCluster::Start(env, kNodes));
  std::vector<std::unique_ptr<Client>> nodes;
  for (size_t i = 0; i < cluster->size(); ++i) {
    TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, ConnectTo(cluster->target(i)));
    nodes.push_back(std::move(client));
  }
  TENSORD_RETURN_IF_ERROR(AwaitMembers(nodes, kNodes));
  std::fprintf(stderr, "tensord-bench: cluster of %d nodes on etcd %s up in %.1f s\n", kNodes,
               cluster->etcd_endpoint().c_str(), SecondsSince(begun));
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> single,
                           ConnectClient(env, TransferPath::kRemote));
  Client& a = *nodes[0];
  Client& b = *nodes[1];

  // A failed call names the node that died, if one did.
  TENSORD_RETURN_IF_ERROR(cluster->WithDeaths(ReadThroughRows(env, a, b)));
  TENSORD_RETURN_IF_ERROR(cluster->WithDeaths(PutRows(
      env, *single, a, nodes, env.config.cluster_large_bytes, env.config.cluster_large_policy)));
  TENSORD_RETURN_IF_ERROR(cluster->WithDeaths(PutRows(
      env, *single, a, nodes, env.config.cluster_small_bytes, env.config.cluster_small_policy)));
  TENSORD_RETURN_IF_ERROR(cluster->WithDeaths(BatchPutRows(env, *cluster, *single, a)));
  TENSORD_RETURN_IF_ERROR(cluster->WithDeaths(SmallFetchRows(env, *single, a, b)));
  nodes.clear();
  cluster.reset();
  // Failover and a joining node at scale, on clusters of their own.
  TENSORD_RETURN_IF_ERROR(RunClusterFailoverRows(env));
  TENSORD_RETURN_IF_ERROR(RunClusterJoinRows(env));
  return absl::OkStatus();
}

}  // namespace tensord::bench
