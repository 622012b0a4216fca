// A cluster of real tensord nodes on one real etcd for fault tests: each
// node may reach etcd through a TCP proxy of its own (so it alone can be
// cut off), may keep a snapshot directory across restarts, and is killed,
// paused, stopped and restarted by PID.
#ifndef TENSORD_TESTS_INTEGRATION_CLUSTER_HARNESS_H_
#define TENSORD_TESTS_INTEGRATION_CLUSTER_HARNESS_H_

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tensord/client.h"
#include "tests/integration/server_process.h"
#include "tests/integration/tcp_proxy.h"
#include "tests/process/etcd_process.h"

namespace tensord::testing {

struct HarnessNode {
  std::string name;
  // Reaches etcd through a proxy that CutFromEtcd pauses.
  bool through_proxy = false;
  // Keeps --snapshot-dir across restarts (written at SIGTERM, restored at start).
  bool snapshots = false;
  std::vector<std::string> flags;
};

// Not thread-safe: one thread (the test's) starts, faults and stops the
// nodes; other threads may read addresses through address() under their
// own synchronisation.
class ClusterHarness {
 public:
  // `etcd` must outlive the harness. Nodes join under `prefix` with a lease
  // TTL of `ttl`.
  ClusterHarness(EtcdProcess& etcd, std::string prefix, absl::Duration ttl = absl::Seconds(2));
  ~ClusterHarness();

  // Starts a node; its index is the order of adding.
  absl::Status Add(HarnessNode node);

  size_t size() const { return nodes_.size(); }
  bool running(size_t i) const { return nodes_[i].process != nullptr; }
  const std::string& name(size_t i) const { return nodes_[i].spec.name; }
  // The node's gRPC address now (a restart takes a new port).
  std::string address(size_t i) const;
  ServerProcess& process(size_t i) { return *nodes_[i].process; }
  // Bumped at every (re)start: clients reconnect when it moved.
  uint64_t generation(size_t i) const { return nodes_[i].generation; }

  // Stops the node with `signal` (SIGKILL: nothing is written; SIGTERM:
  // leaves the cluster and writes its snapshot).
  absl::Status Stop(size_t i, int signal);
  // Starts a stopped node again, retrying while etcd still lists its
  // previous life (a killed node's lease lasts up to the TTL).
  absl::Status Start(size_t i, absl::Duration patience = absl::Seconds(20));
  void Pause(size_t i) { nodes_[i].process->Pause(); }
  void Resume(size_t i) { nodes_[i].process->Resume(); }
  bool paused(size_t i) const { return running(i) && nodes_[i].process->paused(); }
  // Stops all traffic between the node and etcd (a partition), and back.
  void CutFromEtcd(size_t i);
  void ReconnectToEtcd(size_t i);

  // The flags that join a node to this cluster, for nodes started elsewhere.
  std::vector<std::string> JoinFlags(const std::string& name, const std::string& endpoint) const;
  std::string StderrTails() const;

 private:
  struct Node {
    HarnessNode spec;
    std::unique_ptr<TcpProxy> proxy;
    std::string snapshot_dir;
    std::unique_ptr<ServerProcess> process;
    uint64_t generation = 0;
  };
  absl::Status Launch(Node& node);

  EtcdProcess& etcd_;
  const std::string prefix_;
  const absl::Duration ttl_;
  std::vector<Node> nodes_;
};

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_CLUSTER_HARNESS_H_
