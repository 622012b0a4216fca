#include "bench/bench_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/scoped_fd.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

constexpr char kPrefix[] = "/tensord-bench";

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

}  // namespace

absl::Status BenchCluster::StartEtcd() {
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    TENSORD_ASSIGN_OR_RETURN(int client_port, FreeLoopbackPort());
    TENSORD_ASSIGN_OR_RETURN(int peer_port, FreeLoopbackPort());
    if (client_port == peer_port) continue;
    const std::string client_url = absl::StrCat("http://127.0.0.1:", client_port);
    const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port);
    // A million names take about 220 MiB of etcd's database; its default
    // 2 GiB quota holds that with room for the history between compactions.
    absl::StatusOr<std::unique_ptr<ChildProcess>> etcd = ChildProcess::StartWhen(
        {kEtcdBinary, "--name=tensord-bench",
         absl::StrCat("--data-dir=", dir_.path(), "/etcd-", attempt),
         "--listen-client-urls=" + client_url, "--advertise-client-urls=" + client_url,
         "--listen-peer-urls=" + peer_url, "--initial-advertise-peer-urls=" + peer_url,
         "--initial-cluster=tensord-bench=" + peer_url, "--initial-cluster-state=new",
         "--log-level=warn", "--listen-metrics-urls="},
        [client_port] { return EtcdHealthy(client_port); },
        absl::StrCat(dir_.path(), "/etcd-", attempt, ".log"), absl::Seconds(30));
    if (etcd.ok()) {
      etcd_ = *std::move(etcd);
      endpoint_ = client_url;
      return absl::OkStatus();
    }
    last = etcd.status();
    std::fprintf(stderr, "tensord-bench: etcd did not start (attempt %d): %s\n", attempt + 1,
                 std::string(last.message()).c_str());
  }
  return last;
}

absl::StatusOr<std::unique_ptr<BenchCluster>> BenchCluster::Start(
    const BenchEnv& env, int nodes, const std::vector<std::string>& extra_flags) {
  TENSORD_ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("tensord-bench-cluster-"));
  std::unique_ptr<BenchCluster> cluster(new BenchCluster(std::move(dir), env, extra_flags));
  TENSORD_RETURN_IF_ERROR(cluster->StartEtcd());
  for (int i = 0; i < nodes; ++i) {
    TENSORD_RETURN_IF_ERROR(cluster->AddNode(std::string(1, static_cast<char>('a' + i))).status());
  }
  return cluster;
}

absl::StatusOr<size_t> BenchCluster::AddNode(const std::string& name) {
  const std::string& path = dir_.path();
  // The flags of the bench's single tensord, plus the cluster's.
  std::vector<std::string> argv = {env_.tensord_binary,
                                   "--listen=127.0.0.1:0",
                                   absl::StrCat("--ready-file=", path, "/", name, ".ready"),
                                   absl::StrCat("--handoff-socket=", path, "/", name, ".sock"),
                                   "--max-host-bytes=6GiB",
                                   "--max-tensor-bytes=2GiB",
                                   "--log-level=warning",
                                   "--device-backend=" + env_.device_backend,
                                   "--etcd-endpoints=" + endpoint_,
                                   absl::StrCat("--node-name=", name),
                                   absl::StrCat("--etcd-prefix=", kPrefix)};
  argv.insert(argv.end(), extra_flags_.begin(), extra_flags_.end());
  TENSORD_ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> node,
      ChildProcess::Start(argv, absl::StrCat(path, "/", name, ".ready"),
                          absl::StrCat(path, "/", name, ".log"), absl::Seconds(30)));
  targets_.push_back(node->ready_lines().front());
  names_.push_back(name);
  nodes_.push_back(std::move(node));
  paused_.push_back(false);
  return nodes_.size() - 1;
}

BenchCluster::~BenchCluster() {
  for (size_t i = 0; i < nodes_.size(); ++i) Resume(i);
  while (!nodes_.empty()) nodes_.pop_back();
}

pid_t BenchCluster::pid(size_t i) const { return nodes_[i] == nullptr ? -1 : nodes_[i]->pid(); }

void BenchCluster::Kill(size_t i) {
  if (nodes_[i] == nullptr) return;
  Resume(i);
  kill(nodes_[i]->pid(), SIGKILL);
  nodes_[i].reset();  // reaps it
}

void BenchCluster::Pause(size_t i) {
  if (nodes_[i] == nullptr || paused_[i]) return;
  kill(nodes_[i]->pid(), SIGSTOP);
  paused_[i] = true;
}

void BenchCluster::Resume(size_t i) {
  if (nodes_[i] == nullptr || !paused_[i]) return;
  kill(nodes_[i]->pid(), SIGCONT);
  paused_[i] = false;
}

absl::Status BenchCluster::CheckAlive() {
  if (!etcd_->Alive()) {
    return absl::UnavailableError(absl::StrCat("etcd exited; its log:\n", etcd_->LogTail()));
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i] != nullptr && !nodes_[i]->Alive()) {
      return absl::UnavailableError(
          absl::StrCat("cluster node ", names_[i], " exited; its log:\n", nodes_[i]->LogTail()));
    }
  }
  return absl::OkStatus();
}

absl::Status BenchCluster::WithDeaths(absl::Status status) {
  absl::Status alive = CheckAlive();
  if (alive.ok()) return status;
  if (status.ok()) return alive;
  return absl::Status(status.code(), absl::StrCat(status.message(), "\n", alive.message()));
}

absl::StatusOr<std::unique_ptr<Client>> ConnectTo(const std::string& target,
                                                  absl::Duration timeout) {
  ClientOptions options;
  options.server = target;
  options.own_connection = true;
  options.path = TransferPath::kRemote;
  options.timeout = timeout;
  return Client::Connect(options);
}

absl::Status AwaitMembers(const std::vector<std::unique_ptr<Client>>& clients, size_t expected) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (size_t i = 0; i < clients.size(); ++i) {
    while (true) {
      TENSORD_ASSIGN_OR_RETURN(ClusterMembers members, clients[i]->ClusterNodes());
      if (members.nodes.size() == expected) break;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("a node lists ", members.nodes.size(),
                                                        " of ", expected, " nodes after 20 s"));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  return absl::OkStatus();
}

}  // namespace tensord::bench
