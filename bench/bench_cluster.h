// The cluster the bench's cluster section runs on: a real etcd
// (/usr/bin/etcd, Debian's etcd-server) and tensord nodes of its own on
// 127.0.0.1, each started and stopped by its pid, in a directory of its own.
#ifndef TENSORD_BENCH_BENCH_CLUSTER_H_
#define TENSORD_BENCH_BENCH_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/cases.h"
#include "tensord/client.h"
#include "tests/process/child_process.h"
#include "tests/process/etcd_process.h"

namespace tensord::bench {

// The processes come from the helpers the tests use (tests/process).
using testing::ChildProcess;
using testing::EtcdProcess;
using testing::kEtcdBinary;
using testing::TempDir;

// Members are destroyed in reverse order: the nodes (SIGTERM: they leave
// the cluster; a paused one is resumed first), then etcd, then the
// directory.
class BenchCluster {
 public:
  // etcd and nodes "a", "b", "c"... (`nodes` of them), each with the
  // bench's single-tensord flags plus the cluster's and `extra_flags`.
  static absl::StatusOr<std::unique_ptr<BenchCluster>> Start(
      const BenchEnv& env, int nodes, const std::vector<std::string>& extra_flags = {});
  ~BenchCluster();

  // Starts one more node named `name`; its index is returned.
  absl::StatusOr<size_t> AddNode(const std::string& name);
  // SIGKILL, then forgets the node (its index stays, unusable).
  void Kill(size_t i);
  void Pause(size_t i);
  void Resume(size_t i);

  size_t size() const { return nodes_.size(); }
  const std::string& target(size_t i) const { return targets_[i]; }
  const std::string& name(size_t i) const { return names_[i]; }
  pid_t pid(size_t i) const;
  pid_t etcd_pid() const { return etcd_->pid(); }
  std::string etcd_endpoint() const { return etcd_->endpoint(); }
  const std::string& directory() const { return dir_.path(); }

  // OK while every process runs; otherwise which one exited, with its log.
  absl::Status CheckAlive();
  // `status`, with which process died appended if one did.
  absl::Status WithDeaths(absl::Status status);

 private:
  explicit BenchCluster(TempDir directory, const BenchEnv& env, std::vector<std::string> flags)
      : dir_(std::move(directory)), env_(env), extra_flags_(std::move(flags)) {}
  absl::Status StartEtcd();

  TempDir dir_;
  const BenchEnv& env_;
  const std::vector<std::string> extra_flags_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::vector<std::unique_ptr<ChildProcess>> nodes_;  // null once killed
  std::vector<std::string> targets_;                  // "127.0.0.1:PORT"
  std::vector<std::string> names_;
};

// A client of its own (own TCP connection, kRemote) to `target`, with a
// deadline so a hung pull fails the section instead of hanging the run.
absl::StatusOr<std::unique_ptr<Client>> ConnectTo(const std::string& target,
                                                  absl::Duration timeout = absl::Seconds(120));

// Waits until every client's node lists `expected` members.
absl::Status AwaitMembers(const std::vector<std::unique_ptr<Client>>& clients, size_t expected);

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_BENCH_CLUSTER_H_
