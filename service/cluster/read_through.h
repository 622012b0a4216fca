// Read-through: a read on this node of a name whose latest version another
// node holds pulls that version from a live holder (gRPC Fetch of the exact
// version, written straight into a new registry buffer), publishes it here
// as a kCache replica and registers it, so later readers on this node get
// the zero-copy handoff and other nodes may pull from here. Its threads
// also run the other blocking cluster work (replication pulls, deletes).
#ifndef TENSORD_SERVICE_CLUSTER_READ_THROUGH_H_
#define TENSORD_SERVICE_CLUSTER_READ_THROUGH_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "service/cluster/cluster_directory.h"
#include "service/common/cluster_reads.h"
#include "service/registry/registry.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace tensord {

struct ReadThroughOptions {
  // Pulls (and delete propagations) running at once; more wait their turn.
  size_t threads = 8;
  // Deadline of one pull from one holder.
  absl::Duration pull_timeout = absl::Minutes(5);
  // Bearer token this node presents to other nodes (--cluster-token-file);
  // empty when the nodes run without authentication.
  std::string bearer_token;
  // TLS to the other nodes: the CA of their server certificates (empty:
  // plaintext), the name to check them against (empty: the advertise
  // host), and this node's certificate and key, presented to nodes that
  // require client certificates.
  std::string peer_ca_pem;
  std::string peer_tls_server_name;
  std::string client_cert_pem;
  std::string client_key_pem;
  // gRPC's receive limit on the pulling channel (the holder's chunk size
  // must fit).
  int max_message_bytes = 64 << 20;
  // A channel to another node closes its idle connection itself after this
  // (gRPC's client idle timeout), before that node's abrupt idle close can
  // cross a pull or a replication: PeerIdleTimeout(--connection-idle-
  // timeout), as nodes run alike. Infinite: never.
  absl::Duration peer_connection_idle_timeout = absl::InfiniteDuration();
};

// The idle timeout for channels to servers that close idle connections
// after `server_idle_timeout` (0: never): gRPC closes between one and two
// idle timeouts after the last call, so 2/5 of the server's keeps the
// client's close first; at least gRPC's minimum of 1 s.
absl::Duration PeerIdleTimeout(absl::Duration server_idle_timeout);

struct ReadThroughStats {
  uint64_t pulls = 0;         // versions pulled and published here
  uint64_t pulled_bytes = 0;
  uint64_t pull_failures = 0; // pulls from one holder that failed
  uint64_t joined = 0;        // reads that waited on a pull already running
};

// Thread-safe; the registry must outlive it.
class ReadThrough {
 public:
  using Done = ClusterReads::Done;
  ReadThrough(std::shared_ptr<ClusterDirectory> directory, Registry& registry,
              ReadThroughOptions options);
  // Cancels the running pulls, waits for their threads, and answers what
  // never ran (UNAVAILABLE).
  ~ReadThrough();
  ReadThrough(const ReadThrough&) = delete;
  ReadThrough& operator=(const ReadThrough&) = delete;

  // ClusterReads::PullLatest.
  void PullLatest(std::string name, Done done);

  // Pulls `holder`'s version into the registry with `retention` and records
  // its origin; ABORTED when this node published another version of the
  // name meanwhile (its latest is no longer `held_version`). Blocks.
  absl::Status PullFrom(const HolderRecord& holder, uint64_t held_version, Retention retention);

  // Runs `work` on one of the pull threads, in turn; `abandon` instead when
  // the work will never run (shutdown), so its caller still gets an answer.
  using Work = absl::AnyInvocable<void() &&>;
  void Enqueue(Work work, Work abandon);

  // A channel to another node, one per address, kept.
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address);
  const std::string& bearer_token() const { return options_.bearer_token; }

  ReadThroughStats stats() const;

 private:
  absl::Status Pull(const std::string& name);
  void WorkLoop();

  const std::shared_ptr<ClusterDirectory> directory_;
  Registry& registry_;
  const ReadThroughOptions options_;

  std::atomic<uint64_t> pulls_{0};
  std::atomic<uint64_t> pulled_bytes_{0};
  std::atomic<uint64_t> pull_failures_{0};
  std::atomic<uint64_t> joined_{0};

  std::mutex mu_;
  std::condition_variable work_ready_;
  struct Job {
    Work work;
    Work abandon;
  };
  std::deque<Job> queue_;  // guarded by mu_
  // The calls of the pulls running now: cancelled at shutdown, so it does
  // not wait out their deadlines.
  absl::flat_hash_set<grpc::ClientContext*> pulling_;  // guarded by mu_
  // Reads waiting on the pull of each name (the first one started it).
  absl::flat_hash_map<std::string, std::vector<Done>> in_flight_;  // guarded by mu_
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_READ_THROUGH_H_
