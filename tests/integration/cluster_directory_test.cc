// The cluster directory against a real etcd and three tensord processes:
// a name put on one node is read from any other (read-through, one pull
// for concurrent misses, the copy kept as a cache replica and itself
// registered), "latest" means the same on every node, deletes reach every
// node, and a killed holder's readers are served from a surviving replica.
#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/cluster_test_support.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

class ClusterDirectoryTest : public EtcdClusterTest {
 protected:
  void SetUp() override {
    EtcdClusterTest::SetUp();
    if (etcd_ == nullptr) return;  // skipped or failed
    for (const char* name : {"node-a", "node-b", "node-c"}) {
      ServerProcessOptions options;
      options.flags = NodeFlags(name, "/tensord-dir-test");
      options.flags.push_back("--metrics-listen=127.0.0.1:0");
      if (std::string(name) == "node-a") {
        // Node a has a (simulated) device; b and c have none.
        options.flags.push_back("--device-backend=simulated");
        options.flags.push_back("--simulated-devices=1");
      }
      absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
      ASSERT_TRUE(node.ok()) << node.status();
      clients_.push_back(ConnectClient((*node)->address(), RemoteClientOptions()));
      ASSERT_NE(clients_.back(), nullptr);
      nodes_.push_back(std::move(*node));
    }
  }

  static HostTensor Pattern(size_t size, uint64_t seed) {
    return CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, seed));
  }

  TensorInfo Put(int node, const std::string& name, const HostTensor& tensor) {
    absl::StatusOr<TensorInfo> info = clients_[node]->Put(name, tensor.dl());
    EXPECT_TRUE(info.ok()) << name << ": " << info.status();
    return info.ok() ? *info : TensorInfo{};
  }

  // Whether a fetch of `name` on `node` returns exactly `expected`'s bytes.
  ::testing::AssertionResult FetchesAs(int node, const std::string& name,
                                       const HostTensor& expected) {
    absl::StatusOr<Tensor> fetched = clients_[node]->Fetch(name);
    if (!fetched.ok()) {
      return ::testing::AssertionFailure()
             << "fetch of " << name << " on node " << node << ": " << fetched.status();
    }
    const std::vector<uint8_t> bytes = TensorBytes(*fetched);
    return BytesEqual(bytes.data(), bytes.size(), expected.storage.data(), expected.storage.size());
  }

  // Lines a node logged for event `event` about tensor `name`.
  size_t LoggedFor(int node, absl::string_view event, absl::string_view name) {
    size_t count = 0;
    const std::string log = nodes_[node]->Stderr();
    const std::string needle = absl::StrCat("event=", event);
    const std::string named = absl::StrCat("name=", name, " ");
    for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) {
      const size_t end = log.find('\n', at);
      if (log.substr(at, end - at).find(named) != std::string::npos) ++count;
    }
    return count;
  }

  std::vector<std::unique_ptr<ServerProcess>> nodes_;
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_F(ClusterDirectoryTest, ANamePutOnOneNodeIsReadOnEveryOther) {
  const HostTensor tensor = Pattern(3 << 20, 7);  // chunked, not inline
  Put(0, "w/big", tensor);
  const HostTensor small = Pattern(100, 8);  // travels inline in the header
  Put(0, "w/small", small);
  for (int node : {1, 2}) {
    EXPECT_TRUE(FetchesAs(node, "w/big", tensor));
    EXPECT_TRUE(FetchesAs(node, "w/small", small));
  }
  // The pulled copy is kept here as a cache replica: a second read is local.
  absl::StatusOr<TensorInfo> kept = clients_[1]->Stat("w/big");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->retention, Retention::kCache);
  EXPECT_TRUE(FetchesAs(1, "w/big", tensor));
  EXPECT_EQ(LoggedFor(1, "cluster_pulled", "w/big"), 1u) << nodes_[1]->StderrTail();
  // Stat alone reads through too.
  absl::StatusOr<TensorInfo> stat = clients_[2]->Stat("w/small");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->total_bytes, 100u);
  // A name nobody holds is NOT_FOUND everywhere, saying so.
  absl::StatusOr<Tensor> missing = clients_[2]->Fetch("w/nobody");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_NE(missing.status().message().find("any node of the cluster"), std::string::npos)
      << missing.status();
}

TEST_F(ClusterDirectoryTest, ABatchFetchPullsTheItemsHeldElsewhere) {
  const HostTensor a = Pattern(64 << 10, 91);
  const HostTensor b = Pattern(300, 92);
  Put(0, "bf/a", a);
  Put(2, "bf/b", b);
  const HostTensor local = Pattern(50, 93);
  Put(1, "bf/local", local);
  const std::vector<TensorRef> wanted = {{"bf/a", 0}, {"bf/none", 0}, {"bf/local", 0}, {"bf/b", 0}};
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> fetched = clients_[1]->BatchFetch(wanted);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->size(), 4u);
  ASSERT_TRUE((*fetched)[0].ok()) << (*fetched)[0].status();
  EXPECT_EQ(TensorBytes(*(*fetched)[0]), a.storage);
  EXPECT_EQ((*fetched)[1].status().code(), absl::StatusCode::kNotFound) << (*fetched)[1].status();
  ASSERT_TRUE((*fetched)[2].ok()) << (*fetched)[2].status();
  EXPECT_EQ(TensorBytes(*(*fetched)[2]), local.storage);
  ASSERT_TRUE((*fetched)[3].ok()) << (*fetched)[3].status();
  EXPECT_EQ(TensorBytes(*(*fetched)[3]), b.storage);
}

TEST_F(ClusterDirectoryTest, ConcurrentMissesOnOneNodePullOnce) {
  const HostTensor tensor = Pattern(8 << 20, 9);
  Put(0, "kv/block", tensor);
  constexpr int kReaders = 8;
  std::vector<std::unique_ptr<Client>> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.push_back(ConnectClient(nodes_[1]->address(), RemoteClientOptions()));
    ASSERT_NE(readers.back(), nullptr);
    // Connected before the concurrent reads: a loaded run saw one reader's
    // first connection fail ("failed to connect to all addresses", its call
    // failing fast), which is not what this test is about. Bounded.
    EXPECT_TRUE(WaitUntil([&] { return readers.back()->Health().ok(); }, absl::Seconds(20)));
  }
  std::atomic<int> right{0};
  std::vector<std::string> outcomes(kReaders);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReaders; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<Tensor> fetched = readers[i]->Fetch("kv/block");
      if (!fetched.ok()) {
        outcomes[i] = fetched.status().ToString();
      } else if (TensorBytes(*fetched) != tensor.storage) {
        outcomes[i] = "wrong bytes";
      } else {
        right.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(right.load(), kReaders) << ::testing::PrintToString(outcomes) << "\n"
                                    << nodes_[1]->StderrTail();
  EXPECT_EQ(LoggedFor(1, "cluster_pulled", "kv/block"), 1u) << nodes_[1]->StderrTail();
  absl::StatusOr<std::string> scraped =
      HttpGet(LogField(nodes_[1]->Stderr(), "metrics_serving", "address"), "/metrics");
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_TRUE(absl::StrContains(*scraped, "\ntensord_cluster_pulls_total 1\n")) << *scraped;
  EXPECT_TRUE(absl::StrContains(
      *scraped, absl::StrCat("\ntensord_cluster_pulled_bytes_total ", 8 << 20, "\n")))
      << *scraped;
}

TEST_F(ClusterDirectoryTest, TheLatestVersionIsTheSameOnEveryNode) {
  const HostTensor first = Pattern(64 << 10, 1);
  const HostTensor second = Pattern(64 << 10, 2);
  Put(0, "model/w", first);
  ASSERT_TRUE(FetchesAs(1, "model/w", first));  // node b now holds a replica of the first
  Put(2, "model/w", second);                    // a newer version, published on node c
  // Registration is asynchronous (milliseconds): every node reads the
  // second version once the directory has it, node b dropping its stale copy.
  for (int node : {0, 1, 2}) {
    EXPECT_TRUE(
        WaitUntil([&] { return bool(FetchesAs(node, "model/w", second)); }, absl::Seconds(15)))
        << "node " << node << ": " << FetchesAs(node, "model/w", second).message() << "\n"
        << nodes_[node]->StderrTail();
  }
}

TEST_F(ClusterDirectoryTest, ADeleteOnAnyNodeRemovesTheNameEverywhere) {
  const HostTensor tensor = Pattern(4096, 3);
  Put(0, "gone/x", tensor);
  ASSERT_TRUE(FetchesAs(1, "gone/x", tensor));
  // Node c holds no copy: the delete still reaches every holder.
  absl::StatusOr<uint64_t> deleted = clients_[2]->Delete("gone/x");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  for (int node : {0, 1, 2}) {
    EXPECT_TRUE(WaitUntil(
        [&] {
          return clients_[node]->Fetch("gone/x").status().code() == absl::StatusCode::kNotFound;
        },
        absl::Seconds(5)))
        << "node " << node << " still serves a deleted name: " << nodes_[node]->StderrTail();
  }
  // A later put of the name is newer than the delete and is read everywhere.
  const HostTensor again = Pattern(4096, 4);
  Put(1, "gone/x", again);
  EXPECT_TRUE(WaitUntil([&] { return bool(FetchesAs(2, "gone/x", again)); }, absl::Seconds(5)));
}

// A delete of a cache name on the node holding it used to answer
// NOT_FOUND: the record (none) was asked after the stale-copy sweep had
// already taken the cache copy.
TEST_F(ClusterDirectoryTest, ADeleteOfACacheNameOnItsNodeSucceedsAndRemovesIt) {
  const HostTensor tensor = Pattern(256, 5);
  PutOptions cache;
  cache.retention = Retention::kCache;
  ASSERT_TRUE(clients_[0]->Put("cached/x", tensor.dl(), cache).ok());
  absl::StatusOr<uint64_t> deleted = clients_[0]->Delete("cached/x");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(clients_[0]->Fetch("cached/x").status().code(), absl::StatusCode::kNotFound);
  // A second delete finds nothing, and says so.
  EXPECT_EQ(clients_[0]->Delete("cached/x").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterDirectoryTest, AKilledHoldersReadersAreServedFromAReplica) {
  const HostTensor tensor = Pattern(1 << 20, 5);
  Put(0, "ha/w", tensor);
  ASSERT_TRUE(FetchesAs(1, "ha/w", tensor));  // node b keeps a registered replica
  // Wait until node b's replica is registered, then kill the original's node.
  ASSERT_TRUE(
      WaitUntil([&] { return LoggedFor(1, "cluster_pulled", "ha/w") == 1; }, absl::Seconds(2)));
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(nodes_[0]->Stop(SIGKILL).ok());
  // Inside the TTL window the dead node is still listed: node c tries it,
  // fails to connect, and pulls from node b instead, with no error.
  EXPECT_TRUE(FetchesAs(2, "ha/w", tensor)) << nodes_[2]->StderrTail();
}

// A device tensor held on one node is read through any node: a node with
// no device pulls it into host memory (a Fetch over gRPC answers host bytes
// anyway). With replicas=2 the copy on the node without a device is host
// memory too.
TEST_F(ClusterDirectoryTest, ADeviceTensorHeldOnAnotherNodeIsReadThroughAnyNode) {
  const HostTensor tensor = Pattern((3 << 20) + 17, 91);
  PutOptions on_device;
  on_device.device = DLDevice{kDLCUDA, 0};
  absl::StatusOr<TensorInfo> put = clients_[0]->Put("dev/w", tensor.dl(), on_device);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->device.device_type, kDLCUDA);
  EXPECT_TRUE(FetchesAs(1, "dev/w", tensor));
  EXPECT_TRUE(FetchesAs(2, "dev/w", tensor));
  EXPECT_TRUE(FetchesAs(0, "dev/w", tensor));

  on_device.replicas = 2;
  const HostTensor next = Pattern(1 << 20, 92);
  absl::StatusOr<TensorInfo> replicated = clients_[0]->Put("dev/r", next.dl(), on_device);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  for (int node : {1, 2}) EXPECT_TRUE(FetchesAs(node, "dev/r", next)) << "node " << node;
}

TEST_F(ClusterDirectoryTest, AClusterWatchLetsAReaderSwapToEachVersionPublishedAnywhere) {
  // The reader on node c watches model/ across the cluster.
  WatchOptions options;
  options.cluster = true;
  options.send_existing = true;
  const HostTensor first = Pattern(32 << 10, 61);
  Put(0, "model/w", first);
  // The existing versions come from node c's mirror of the directory, which
  // follows etcd by a watch delivery: wait until it lists the name.
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<ListResult> listed = clients_[2]->ListCluster("model/");
        return listed.ok() && listed->tensors.size() == 1;
      },
      absl::Seconds(5)));
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = clients_[2]->Watch("model/", options);
  ASSERT_TRUE(watch.ok()) << watch.status();
  absl::StatusOr<WatchEvent> existing = (*watch)->Next(absl::Seconds(5));
  ASSERT_TRUE(existing.ok()) << existing.status();
  EXPECT_TRUE(existing->existing);
  ASSERT_EQ(existing->items.size(), 1u);
  EXPECT_EQ(existing->items[0].node, "node-a");
  // A producer republishes on nodes a and b; on each event the reader
  // fetches the name from its own node and gets exactly that version.
  uint64_t last_position = (*watch)->position();
  for (int round = 0; round < 4; ++round) {
    const HostTensor next = Pattern(32 << 10, 70 + round);
    const TensorInfo put = Put(round % 2, "model/w", next);
    absl::StatusOr<WatchEvent> event = (*watch)->Next(absl::Seconds(5));
    ASSERT_TRUE(event.ok()) << "round " << round << ": " << event.status();
    ASSERT_EQ(event->kind, WatchEvent::Kind::kPublished);
    ASSERT_EQ(event->items.size(), 1u);
    EXPECT_EQ(event->items[0].node, round % 2 == 0 ? "node-a" : "node-b");
    EXPECT_EQ(event->items[0].crc32c, put.crc32c);
    EXPECT_GT(event->version, last_position) << "positions are increasing etcd revisions";
    last_position = event->version;
    EXPECT_TRUE(FetchesAs(2, "model/w", next)) << "round " << round;
  }
  // A delete anywhere is an event too.
  ASSERT_TRUE(clients_[1]->Delete("model/w").ok());
  absl::StatusOr<WatchEvent> deleted = (*watch)->Next(absl::Seconds(5));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->kind, WatchEvent::Kind::kDeleted);
  ASSERT_EQ(deleted->items.size(), 1u);
  EXPECT_EQ(deleted->items[0].name, "model/w");
  // Replicas and read-through copies are not publishes: nothing more came.
  absl::StatusOr<WatchEvent> none = (*watch)->Next(absl::Milliseconds(300));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kDeadlineExceeded) << none.status();
  // Resuming from before what this node's directory has seen is reported,
  // never silently skipped.
  WatchOptions resume;
  resume.cluster = true;
  resume.from_version = 1;
  absl::StatusOr<std::unique_ptr<WatchStream>> old = clients_[2]->Watch("model/", resume);
  ASSERT_TRUE(old.ok()) << old.status();
  absl::StatusOr<WatchEvent> behind = (*old)->Next(absl::Seconds(5));
  ASSERT_TRUE(behind.ok()) << behind.status();
  EXPECT_EQ(behind->kind, WatchEvent::Kind::kFellBehind);
  EXPECT_EQ(behind->missed_after, 1u);
}

TEST(ClusterWatchSingleNodeTest, AClusterWatchOnASingleNodeIsRefusedNamingWhy) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<Client> client = ConnectClient((*server)->address(), RemoteClientOptions());
  WatchOptions options;
  options.cluster = true;
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = client->Watch("m/", options);
  absl::Status status = watch.ok() ? (*watch)->Next(absl::Seconds(5)).status() : watch.status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(client->ListCluster("").status().code(), absl::StatusCode::kFailedPrecondition);
  PutOptions two;
  two.replicas = 2;
  const HostTensor tensor = CompactTensor(kU8, {4}, {1, 2, 3, 4});
  absl::StatusOr<TensorInfo> put = client->Put("m/x", tensor.dl(), two);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kFailedPrecondition) << put.status();
  EXPECT_EQ(client->Stat("m/x").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tensord::testing
