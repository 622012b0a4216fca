#include "tests/integration/cluster_harness.h"

#include <stdlib.h>

#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tensord::testing {

ClusterHarness::ClusterHarness(EtcdProcess& etcd, std::string prefix, absl::Duration ttl)
    : etcd_(etcd), prefix_(std::move(prefix)), ttl_(ttl) {}

ClusterHarness::~ClusterHarness() {
  // Paused nodes are resumed by ServerProcess before they are stopped.
  for (Node& node : nodes_) {
    node.process.reset();
    if (node.proxy != nullptr) node.proxy->Resume();
    if (!node.snapshot_dir.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(node.snapshot_dir, ignored);
    }
  }
}

std::vector<std::string> ClusterHarness::JoinFlags(const std::string& name,
                                                   const std::string& endpoint) const {
  return {"--etcd-endpoints=" + endpoint, "--node-name=" + name,
          absl::StrCat("--etcd-lease-ttl=", absl::FormatDuration(ttl_)),
          absl::StrCat("--etcd-prefix=", prefix_)};
}

absl::Status ClusterHarness::Add(HarnessNode spec) {
  Node node;
  node.spec = std::move(spec);
  if (node.spec.through_proxy) {
    // etcd's endpoint is http://127.0.0.1:PORT.
    const std::string endpoint = etcd_.endpoint();
    absl::string_view port_text = endpoint;
    absl::ConsumePrefix(&port_text, "http://127.0.0.1:");
    int port = 0;
    if (!absl::SimpleAtoi(port_text, &port)) {
      return absl::InternalError(absl::StrCat("cannot proxy etcd at ", etcd_.endpoint()));
    }
    absl::StatusOr<std::unique_ptr<TcpProxy>> proxy = TcpProxy::Start("127.0.0.1", port);
    if (!proxy.ok()) return proxy.status();
    node.proxy = *std::move(proxy);
  }
  if (node.spec.snapshots) {
    std::string dir = "/tmp/tensord-harness-snapshot-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) return absl::InternalError("mkdtemp failed");
    node.snapshot_dir = dir;
  }
  nodes_.push_back(std::move(node));
  return Start(nodes_.size() - 1);
}

absl::Status ClusterHarness::Launch(Node& node) {
  ServerProcessOptions options;
  options.flags = JoinFlags(node.spec.name,
                            node.proxy != nullptr ? node.proxy->http_endpoint() : etcd_.endpoint());
  if (!node.snapshot_dir.empty()) options.flags.push_back("--snapshot-dir=" + node.snapshot_dir);
  options.flags.insert(options.flags.end(), node.spec.flags.begin(), node.spec.flags.end());
  absl::StatusOr<std::unique_ptr<ServerProcess>> started = ServerProcess::Start(options);
  if (!started.ok()) return started.status();
  node.process = *std::move(started);
  ++node.generation;
  return absl::OkStatus();
}

absl::Status ClusterHarness::Start(size_t i, absl::Duration patience) {
  Node& node = nodes_[i];
  if (node.process != nullptr) return absl::FailedPreconditionError("the node is running");
  const absl::Time give_up = absl::Now() + patience;
  absl::Status last;
  while (true) {
    last = Launch(node);
    if (last.ok() || absl::Now() >= give_up) return last;
    // etcd still lists the previous life until its lease runs out.
    absl::SleepFor(absl::Milliseconds(300));
  }
}

absl::Status ClusterHarness::Stop(size_t i, int signal) {
  Node& node = nodes_[i];
  if (node.process == nullptr) return absl::OkStatus();
  absl::StatusOr<int> stopped = node.process->Stop(signal, absl::Seconds(30));
  node.process.reset();
  return stopped.status();
}

std::string ClusterHarness::address(size_t i) const {
  const Node& node = nodes_[i];
  return node.process == nullptr ? std::string() : node.process->address();
}

void ClusterHarness::CutFromEtcd(size_t i) {
  if (nodes_[i].proxy != nullptr) nodes_[i].proxy->Pause();
}

void ClusterHarness::ReconnectToEtcd(size_t i) {
  if (nodes_[i].proxy != nullptr) nodes_[i].proxy->Resume();
}

std::string ClusterHarness::StderrTails() const {
  std::string tails;
  for (const Node& node : nodes_) {
    if (node.process == nullptr) continue;
    absl::StrAppend(&tails, "---- ", node.spec.name, " ----\n", node.process->StderrTail(4096),
                    "\n");
  }
  return tails;
}

}  // namespace tensord::testing
