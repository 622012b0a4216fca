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

}  // namespace

absl::Status BenchCluster::StartEtcd() {
  absl::Status last;
  // A free port can be taken before etcd binds it: a few tries.
  for (int attempt = 0; attempt < 3; ++attempt) {
    // A million names take about 220 MiB of etcd's database; its default
    // 2 GiB quota holds that with room for the history between compactions.
    absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start(absl::Seconds(30));
    if (etcd.ok()) {
      etcd_ = *std::move(etcd);
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
                                   "--etcd-endpoints=" + etcd_->endpoint(),
                                   absl::StrCat("--node-name=", name),
                                   absl::StrCat("--etcd-prefix=", kPrefix)};
  argv.insert(argv.end(), extra_flags_.begin(), extra_flags_.end());
  TENSORD_ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> node,
      ChildProcess::StartWithReadyFile(
          {.argv = std::move(argv), .log_path = absl::StrCat(path, "/", name, ".log")},
          absl::StrCat(path, "/", name, ".ready"), absl::Seconds(30)));
  targets_.push_back(node->ready_lines().front());
  names_.push_back(name);
  nodes_.push_back(std::move(node));
  return nodes_.size() - 1;
}

BenchCluster::~BenchCluster() {
  // Nodes first (each is resumed if paused, then SIGTERM: they leave the
  // cluster), newest first; then etcd.
  while (!nodes_.empty()) nodes_.pop_back();
}

pid_t BenchCluster::pid(size_t i) const { return nodes_[i] == nullptr ? -1 : nodes_[i]->pid(); }

void BenchCluster::Kill(size_t i) {
  if (nodes_[i] == nullptr) return;
  (void)nodes_[i]->Stop(SIGKILL, absl::Seconds(10));
  nodes_[i].reset();
}

void BenchCluster::Pause(size_t i) {
  if (nodes_[i] != nullptr) nodes_[i]->Pause();
}

void BenchCluster::Resume(size_t i) {
  if (nodes_[i] != nullptr) nodes_[i]->Resume();
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
