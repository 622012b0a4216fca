// The cluster section (opt-in: --sections cluster): a real etcd
// (/usr/bin/etcd, Debian's etcd-server) and three tensord nodes of its own
// on 127.0.0.1, each started and stopped by pid, and rows against baselines
// measured in the same rounds:
//   - read-through: a tensor put on node a, fetched through node b by a
//     first reader (b pulls it from a) and a second one (b's copy), against
//     a direct fetch from a. Every round puts a new name and deletes it
//     afterwards, so every first reader really pulls;
//   - puts: replicas=2 against replicas=1 on the same cluster node, and
//     replicas=1 on a cluster node against the bench's single tensord;
//   - directory overhead on a small fetch: a local hit on a cluster node
//     against the same fetch from the bench's single (non-cluster) tensord,
//     and a first read on another node (the pull) against the local hit.
// Without /usr/bin/etcd the section reports one "skipped" row.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/baselines.h"
#include "bench/cases.h"
#include "bench/child_process.h"
#include "service/common/scoped_fd.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

constexpr char kEtcdBinary[] = "/usr/bin/etcd";
constexpr char kPrefix[] = "/tensord-bench";
constexpr const char* kNodeNames[] = {"a", "b", "c"};
constexpr int kNodes = 3;

double Micros(double seconds) { return seconds * 1e6; }

std::string Spread(const std::vector<double>& samples) {
  return absl::StrFormat("median of %d, p99 %.1f us", samples.size(),
                         Micros(Percentile(samples, 99)));
}

// A port the kernel just handed out on 127.0.0.1 and that is free again
// (etcd takes ports on its command line; a race with another process shows
// as an etcd that does not start, and is retried).
absl::StatusOr<int> FreeLoopbackPort() {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("bind 127.0.0.1:0: ", std::strerror(errno)));
  }
  return ntohs(address.sin_port);
}

// GET /health on etcd's client port: true once it reports healthy (it has
// elected itself leader).
bool EtcdHealthy(int port) {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return false;
  timeval timeout{.tv_sec = 1, .tv_usec = 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return false;
  const std::string request =
      "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return false;
  }
  std::string response;
  char buffer[1024];
  for (int reads = 0; reads < 16; ++reads) {
    const ssize_t got = recv(fd.get(), buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    response.append(buffer, static_cast<size_t>(got));
  }
  return absl::StrContains(response, "\"health\":\"true\"");
}

// etcd and the nodes, in a directory of their own. Members are destroyed in
// reverse order: the nodes (SIGTERM: they leave the cluster), then etcd,
// then the directory.
struct Cluster {
  explicit Cluster(TempDir directory) : dir(std::move(directory)) {}
  TempDir dir;
  std::unique_ptr<ChildProcess> etcd;
  std::string endpoint;
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  std::vector<std::string> targets;  // "127.0.0.1:PORT" of each node

  // OK while every process runs; otherwise which one exited, with its log.
  absl::Status CheckAlive() {
    if (!etcd->Alive()) {
      return absl::UnavailableError(absl::StrCat("etcd exited; its log:\n", etcd->LogTail()));
    }
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      if (!nodes[i]->Alive()) {
        return absl::UnavailableError(absl::StrCat("cluster node ", kNodeNames[i],
                                                   " exited; its log:\n", nodes[i]->LogTail()));
      }
    }
    return absl::OkStatus();
  }
};

absl::Status StartEtcd(Cluster& cluster) {
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    TENSORD_ASSIGN_OR_RETURN(int client_port, FreeLoopbackPort());
    TENSORD_ASSIGN_OR_RETURN(int peer_port, FreeLoopbackPort());
    if (client_port == peer_port) continue;
    const std::string client_url = absl::StrCat("http://127.0.0.1:", client_port);
    const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port);
    absl::StatusOr<std::unique_ptr<ChildProcess>> etcd = ChildProcess::StartWhen(
        {kEtcdBinary, "--name=tensord-bench",
         absl::StrCat("--data-dir=", cluster.dir.path(), "/etcd-", attempt),
         "--listen-client-urls=" + client_url, "--advertise-client-urls=" + client_url,
         "--listen-peer-urls=" + peer_url, "--initial-advertise-peer-urls=" + peer_url,
         "--initial-cluster=tensord-bench=" + peer_url, "--initial-cluster-state=new",
         "--log-level=warn", "--listen-metrics-urls="},
        [client_port] { return EtcdHealthy(client_port); },
        absl::StrCat(cluster.dir.path(), "/etcd-", attempt, ".log"), absl::Seconds(30));
    if (etcd.ok()) {
      cluster.etcd = *std::move(etcd);
      cluster.endpoint = client_url;
      return absl::OkStatus();
    }
    last = etcd.status();
    std::fprintf(stderr, "tensord-bench: etcd did not start (attempt %d): %s\n", attempt + 1,
                 std::string(last.message()).c_str());
  }
  return last;
}

absl::StatusOr<std::unique_ptr<Cluster>> StartCluster(const BenchEnv& env) {
  TENSORD_ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("tensord-bench-cluster-"));
  auto cluster = std::make_unique<Cluster>(std::move(dir));
  TENSORD_RETURN_IF_ERROR(StartEtcd(*cluster));
  const std::string& path = cluster->dir.path();
  for (const char* name : kNodeNames) {
    // The flags of the bench's single tensord, plus the cluster's.
    TENSORD_ASSIGN_OR_RETURN(
        std::unique_ptr<ChildProcess> node,
        ChildProcess::Start(
            {env.tensord_binary, "--listen=127.0.0.1:0",
             absl::StrCat("--ready-file=", path, "/", name, ".ready"),
             absl::StrCat("--handoff-socket=", path, "/", name, ".sock"), "--max-host-bytes=6GiB",
             "--max-tensor-bytes=2GiB", "--log-level=warning",
             "--device-backend=" + env.device_backend, "--etcd-endpoints=" + cluster->endpoint,
             absl::StrCat("--node-name=", name), absl::StrCat("--etcd-prefix=", kPrefix)},
            absl::StrCat(path, "/", name, ".ready"), absl::StrCat(path, "/", name, ".log"),
            absl::Seconds(30)));
    cluster->targets.push_back(node->ready_lines().front());
    cluster->nodes.push_back(std::move(node));
  }
  return cluster;
}

absl::StatusOr<std::unique_ptr<Client>> ConnectTo(const std::string& target) {
  ClientOptions options;
  options.server = target;
  options.own_connection = true;
  options.path = TransferPath::kRemote;
  // A pull that hangs fails the section instead of the whole run hanging.
  options.timeout = absl::Seconds(120);
  return Client::Connect(options);
}

// Waits until every node lists all of them (each rereads the member list at
// its lease renewals), so the replicated puts see the whole cluster.
absl::Status AwaitMembers(const std::vector<std::unique_ptr<Client>>& clients) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (size_t i = 0; i < clients.size(); ++i) {
    while (true) {
      TENSORD_ASSIGN_OR_RETURN(ClusterMembers members, clients[i]->ClusterNodes());
      if (members.nodes.size() == clients.size()) break;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("node ", kNodeNames[i], " lists ",
                                                        members.nodes.size(), " of ",
                                                        clients.size(), " nodes after 20 s"));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  return absl::OkStatus();
}

// Puts the first `bytes` of env.source as `name` through `client`, checks
// what the server says it stored, and returns the seconds of the Put call.
absl::StatusOr<double> TimedPut(const BenchEnv& env, Client& client, const std::string& name,
                                uint64_t bytes, uint32_t replicas) {
  const int64_t shape = static_cast<int64_t>(bytes);
  PutOptions options;
  options.replicas = replicas;
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

// The read-through rows: a put on node a, fetched from a, then through b
// twice. FetchInto a pre-faulted buffer, so the rows compare transfers.
absl::Status ReadThroughRows(const BenchEnv& env, Client& a, Client& b) {
  const uint64_t bytes = env.config.cluster_large_bytes;
  int round = 0;
  std::string name;
  enum Case { kDirect, kFirst, kSecond, kNewMemory };
  const std::vector<TimedRun> cases = {
      [&]() -> absl::StatusOr<double> {
        name = absl::StrCat(TensorName("cluster/pull", bytes), "/", round++);
        TENSORD_RETURN_IF_ERROR(TimedPut(env, a, name, bytes, 1).status());
        ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
        return TimedFetchInto(env, a, name, bytes);
      },
      [&] {
        ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
        return TimedFetchInto(env, b, name, bytes);
      },
      [&]() -> absl::StatusOr<double> {
        ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
        TENSORD_ASSIGN_OR_RETURN(double seconds, TimedFetchInto(env, b, name, bytes));
        // b's copy must be its own now (its listing never pulls).
        TENSORD_ASSIGN_OR_RETURN(std::vector<TensorInfo> held, b.ListAll(name));
        if (held.empty() || held.front().name != name) {
          return absl::DataLossError(absl::StrCat("node b served ", name,
                                                  " but does not list a copy of it"));
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
                  .note = absl::StrCat(runs, "; in the cluster section's rounds: what node b's "
                                             "copy of a pulled tensor pays for new memory")});
  env.report.Add({.section = kClusterSection,
                  .name = "fetch from the holder (node a)",
                  .bytes = bytes,
                  .value = direct,
                  .unit = "GB/s",
                  .note = absl::StrCat(runs, "; FetchInto a pre-faulted buffer; baseline of "
                                             "the next two rows")});
  for (auto [which, label, note] :
       {std::tuple{kFirst, "fetch via node b, first reader (pull)",
                   "b pulls a's version into new memory, then serves it; a new name each round"},
        std::tuple{kSecond, "fetch via node b, second reader",
                   "served from b's copy"}}) {
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
  auto put_after_delete = [&](Client& client, const std::string& name,
                              uint32_t replicas) -> absl::StatusOr<double> {
    if (absl::StatusOr<uint64_t> removed = client.Delete(name);
        !removed.ok() && !absl::IsNotFound(removed.status())) {
      return removed.status();
    }
    return TimedPut(env, client, name, bytes, replicas);
  };
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> single_vs_one,
      RepeatInterleaved(policy, {[&] { return put_after_delete(single, single_name, 0); },
                                 [&] { return put_after_delete(a, one_name, 1); }}));
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> one_vs_two,
      RepeatInterleaved(policy, {[&] { return put_after_delete(a, one_name, 1); },
                                 [&] { return put_after_delete(a, two_name, 2); }}));
  // Two nodes hold the replicated name, as their own listings say.
  int holders = 0;
  for (const std::unique_ptr<Client>& node : nodes) {
    TENSORD_ASSIGN_OR_RETURN(std::vector<TensorInfo> held, node->ListAll(two_name));
    if (!held.empty() && held.front().name == two_name) ++holders;
  }
  if (holders != 2) {
    return absl::DataLossError(absl::StrCat("a put with replicas=2 of ", two_name, " is held by ",
                                            holders, " nodes"));
  }
  TENSORD_RETURN_IF_ERROR(single.Delete(single_name).status());
  TENSORD_RETURN_IF_ERROR(a.Delete(one_name).status());
  TENSORD_RETURN_IF_ERROR(a.Delete(two_name).status());

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
  env.report.Add({.section = kClusterSection,
                  .name = "put, cluster node, replicas=1",
                  .bytes = bytes,
                  .value = one_value,
                  .unit = unit,
                  .ratio = one_value / single_value,
                  .baseline = "put, single node",
                  .note = absl::StrCat(spread(single_vs_one[1]),
                                       "; acknowledged once registered in etcd")});
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
  const TimedRun local_hit = [&] { return TimedFetch(a, held, bytes, "local-hit fetch on node a"); };
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> single_vs_hit,
      RepeatInterleaved(env.config.cluster_small_policy,
                        {[&] { return TimedFetch(single, held, bytes, "single-node fetch"); },
                         local_hit}));
  TENSORD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> hit_vs_pull,
      RepeatInterleaved(
          env.config.cluster_small_policy,
          {local_hit, [&]() -> absl::StatusOr<double> {
             const std::string name =
                 absl::StrCat(TensorName("cluster/small-pull", bytes), "/", round++);
             TENSORD_RETURN_IF_ERROR(TimedPut(env, a, name, bytes, 1).status());
             TENSORD_ASSIGN_OR_RETURN(double seconds,
                                      TimedFetch(b, name, bytes, "pull through node b"));
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
    const std::string why = absl::StrCat(kEtcdBinary, " not found (Debian's etcd-server; "
                                         "deploy/install-deps.sh installs it)");
    std::fprintf(stderr, "tensord-bench: cluster section skipped: %s\n", why.c_str());
    env.report.Add({.section = kClusterSection,
                    .name = "skipped: no etcd",
                    .unit = "-",
                    .note = why});
    return absl::OkStatus();
  }
  const Clock::time_point begun = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster, StartCluster(env));
  std::vector<std::unique_ptr<Client>> nodes;
  for (const std::string& target : cluster->targets) {
    TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, ConnectTo(target));
    nodes.push_back(std::move(client));
  }
  TENSORD_RETURN_IF_ERROR(AwaitMembers(nodes));
  std::fprintf(stderr, "tensord-bench: cluster of %d nodes on etcd %s up in %.1f s\n", kNodes,
               cluster->endpoint.c_str(), SecondsSince(begun));
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> single, ConnectClient(env, TransferPath::kRemote));
  Client& a = *nodes[0];
  Client& b = *nodes[1];

  // A failed call names the node that died, if one did.
  auto with_nodes = [&](absl::Status status) {
    absl::Status alive = cluster->CheckAlive();
    if (alive.ok()) return status;
    if (status.ok()) return alive;
    return absl::Status(status.code(), absl::StrCat(status.message(), "\n", alive.message()));
  };
  TENSORD_RETURN_IF_ERROR(with_nodes(ReadThroughRows(env, a, b)));
  TENSORD_RETURN_IF_ERROR(with_nodes(PutRows(env, *single, a, nodes, env.config.cluster_large_bytes,
                                             env.config.cluster_large_policy)));
  TENSORD_RETURN_IF_ERROR(with_nodes(PutRows(env, *single, a, nodes, env.config.cluster_small_bytes,
                                             env.config.cluster_small_policy)));
  TENSORD_RETURN_IF_ERROR(with_nodes(SmallFetchRows(env, *single, a, b)));
  return absl::OkStatus();
}

}  // namespace tensord::bench
