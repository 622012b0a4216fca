// Replicated puts and faults in a cluster of three tensord processes on a
// real etcd: a put with replicas=2 is acknowledged once two nodes hold it,
// readers keep being served while a holder is killed (counting wrong bytes
// and failures), durable puts wait for etcd while cache puts do not, a
// restarted node serves its snapshot's versions again (unavailable, never
// older, while it is away), the local handoff reads a name another node
// holds, and the cluster listing shows every node's names.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/cluster/etcd_client.h"
#include "service/cluster/name_record.h"
#include "service/common/mutex.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/cluster_test_support.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

constexpr char kPrefix[] = "/tensord-rep-test";

class ClusterReplicationTest : public EtcdClusterTest {
 protected:
  std::vector<std::string> NodeFlags(const std::string& name) const {
    return EtcdClusterTest::NodeFlags(name, kPrefix);
  }

  void StartNodes(int count, std::vector<std::string> extra = {}) {
    for (int i = 0; i < count; ++i) {
      ServerProcessOptions options;
      options.flags = NodeFlags(absl::StrCat("node-", std::string(1, static_cast<char>('a' + i))));
      options.flags.insert(options.flags.end(), extra.begin(), extra.end());
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

  // The nodes the name's record lists as holding its latest version.
  std::vector<std::string> Holders(const std::string& name) {
    absl::StatusOr<std::unique_ptr<EtcdClient>> etcd =
        EtcdClient::Create(EtcdClientOptions{.endpoints = {etcd_->endpoint()}});
    if (!etcd.ok()) return {absl::StrCat("<", etcd.status().ToString(), ">")};
    absl::StatusOr<std::optional<EtcdKeyValue>> kv = KvGet(**etcd, NameRecordKey(kPrefix, name));
    if (!kv.ok()) return {absl::StrCat("<", kv.status().ToString(), ">")};
    if (!kv->has_value()) return {};
    absl::StatusOr<NameRecord> record = DecodeNameRecord(kPrefix, **kv);
    if (!record.ok()) return {absl::StrCat("<", record.status().ToString(), ">")};
    std::vector<std::string> nodes = record->holders;
    std::sort(nodes.begin(), nodes.end());
    return nodes;
  }

  std::vector<std::unique_ptr<ServerProcess>> nodes_;
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_F(ClusterReplicationTest, APutWithTwoReplicasIsAcknowledgedOnceTwoNodesHoldIt) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(3));
  const HostTensor tensor = Pattern(2 << 20, 11);
  PutOptions options;
  options.replicas = 2;
  absl::StatusOr<TensorInfo> put = clients_[0]->Put("rep/w", tensor.dl(), options);
  ASSERT_TRUE(put.ok()) << put.status();
  // At the acknowledgement both copies are registered: no waiting here.
  const std::vector<std::string> holders = Holders("rep/w");
  ASSERT_EQ(holders.size(), 2u) << ::testing::PrintToString(holders);
  EXPECT_EQ(holders[0], "node-a");
  // Asking for more copies than live nodes fails before a byte moves.
  options.replicas = 4;
  absl::StatusOr<TensorInfo> too_many = clients_[0]->Put("rep/x", tensor.dl(), options);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kFailedPrecondition) << too_many.status();
  EXPECT_TRUE(
      absl::StrContains(too_many.status().message(), "needs 4 live nodes; the cluster has 3"))
      << too_many.status();
  EXPECT_EQ(clients_[0]->Stat("rep/x").status().code(), absl::StatusCode::kNotFound);
  // The listing of the cluster shows every node's names and where they are.
  const HostTensor other = Pattern(100, 12);
  ASSERT_TRUE(clients_[2]->Put("rep/only-on-c", other.dl()).ok());
  absl::StatusOr<ListResult> listed = clients_[1]->ListCluster("rep/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->tensors.size(), 2u);
  EXPECT_EQ(listed->tensors[0].name, "rep/only-on-c");
  EXPECT_EQ(listed->tensors[0].node, "node-c");
  EXPECT_EQ(listed->tensors[0].total_bytes, 100u);
  EXPECT_EQ(listed->tensors[1].name, "rep/w");
}

TEST_F(ClusterReplicationTest, ReadersOfAReplicatedNameSurviveTheKillOfItsNode) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(3));
  const HostTensor tensor = Pattern(256 << 10, 21);
  PutOptions options;
  options.replicas = 2;
  ASSERT_TRUE(clients_[0]->Put("ha/weights", tensor.dl(), options).ok());
  ASSERT_EQ(Holders("ha/weights").size(), 2u);
  // Node a's own readers load it until it is killed; then readers on the
  // two other nodes start. Neither read the name before, so each first
  // read needs the replica (a read-through copy would otherwise stand in
  // for it). Bounded loops; every read is checked.
  std::atomic<bool> killed{false}, stop{false};
  std::atomic<int> reads{0}, failures{0}, wrong{0}, before_kill{0};
  std::string first_failure;
  Mutex failure_mu;
  auto read_loop = [&](int node) {
    const bool after_kill = node != 0;
    while (after_kill && !killed.load() && !stop.load()) absl::SleepFor(absl::Milliseconds(1));
    std::unique_ptr<Client> client = ConnectClient(nodes_[node]->address(), RemoteClientOptions());
    for (int i = 0; i < 2000 && !stop.load(); ++i) {
      if (!after_kill && killed.load()) return;  // its server is gone
      absl::StatusOr<Tensor> fetched = client->Fetch("ha/weights");
      if (!after_kill) {
        if (fetched.ok()) before_kill.fetch_add(1);
        continue;
      }
      if (!fetched.ok()) {
        failures.fetch_add(1);
        MutexLock lock(&failure_mu);
        if (first_failure.empty()) first_failure = fetched.status().ToString();
      } else if (TensorBytes(*fetched) != tensor.storage) {
        wrong.fetch_add(1);
      }
      reads.fetch_add(1);
      absl::SleepFor(absl::Milliseconds(5));
    }
  };
  std::vector<std::thread> readers;
  for (int node : {0, 1, 2}) readers.emplace_back(read_loop, node);
  // Until node a has served some reads (bounded: a loaded ASan run
  // served 5 in a fixed 300 ms).
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
       before_kill.load() <= 5 && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  killed.store(true);
  ASSERT_TRUE(nodes_[0]->Stop(SIGKILL).ok());
  absl::SleepFor(kTtl + absl::Milliseconds(1500));  // through the TTL window and past it
  stop.store(true);
  for (std::thread& reader : readers) reader.join();
  std::cout << "[ measured ] " << before_kill.load() << " reads on node a before its kill -9, then "
            << reads.load() << " reads on nodes b and c through the TTL window: " << failures.load()
            << " failed, " << wrong.load() << " with wrong bytes\n";
  EXPECT_GT(before_kill.load(), 5);
  EXPECT_GT(reads.load(), 50);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(failures.load(), 0) << "of " << reads.load() << " reads; first: " << first_failure;
}

TEST_F(ClusterReplicationTest, ACopyMeantForAKilledNodeGoesToTheNextLiveOne) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(3));
  // Within the TTL the killed node is still listed; rendezvous hashing picks
  // it for about half the names. Each put must still get its two copies.
  ASSERT_TRUE(nodes_[0]->Stop(SIGKILL).ok());
  const HostTensor tensor = Pattern(4096, 101);
  PutOptions options;
  options.replicas = 2;
  for (int i = 0; i < 8; ++i) {
    const std::string name = absl::StrCat("fallback/n", i);
    absl::StatusOr<TensorInfo> put = clients_[1]->Put(name, tensor.dl(), options);
    ASSERT_TRUE(put.ok()) << name << ": " << put.status();
    const std::vector<std::string> holders = Holders(name);
    EXPECT_EQ(holders, (std::vector<std::string>{"node-b", "node-c"})) << name;
  }
}

TEST_F(ClusterReplicationTest, DurablePutsWaitForEtcdAndCachePutsDoNot) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(2));
  ASSERT_TRUE(etcd_->Stop(SIGKILL).ok());
  const HostTensor tensor = Pattern(4096, 31);
  // A durable put must be ordered by etcd before it is acknowledged: with
  // etcd gone it is refused promptly, naming why, and nothing stands.
  const absl::Time start = absl::Now();
  absl::StatusOr<TensorInfo> put = clients_[0]->Put("down/w", tensor.dl());
  EXPECT_EQ(put.status().code(), absl::StatusCode::kUnavailable) << put.status();
  EXPECT_TRUE(absl::StrContains(put.status().message(), "etcd")) << put.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // A cache put needs no order across nodes: it stands here at once.
  PutOptions cache;
  cache.retention = Retention::kCache;
  ASSERT_TRUE(clients_[0]->Put("down/cache", tensor.dl(), cache).ok());
  absl::StatusOr<Tensor> cached = clients_[0]->Fetch("down/cache");
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(TensorBytes(*cached), tensor.storage);
  // A durable read cannot be known to be the latest: refused too.
  EXPECT_EQ(clients_[1]->Fetch("down/w").status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(etcd_->Restart().ok());
  // Once etcd answers the put goes through and every node reads it: the
  // other node once its own etcd channel is back (gRPC's reconnect backoff
  // may still hold it for a moment), and until then it says UNAVAILABLE,
  // never NOT_FOUND.
  EXPECT_TRUE(
      WaitUntil([&] { return clients_[0]->Put("down/w", tensor.dl()).ok(); }, absl::Seconds(15)))
      << nodes_[0]->StderrTail();
  absl::StatusOr<Tensor> fetched = absl::UnavailableError("not fetched yet");
  EXPECT_TRUE(WaitUntil(
      [&] {
        fetched = clients_[1]->Fetch("down/w");
        return fetched.ok() || fetched.status().code() != absl::StatusCode::kUnavailable;
      },
      absl::Seconds(15)))
      << fetched.status() << "\n"
      << nodes_[1]->StderrTail();
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(TensorBytes(*fetched), tensor.storage);
}

TEST_F(ClusterReplicationTest, ANodeRestartedFromItsSnapshotAnnouncesItsTensorsAgain) {
  char pattern[] = "/tmp/tensord-rep-snapshot-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string snapshot_dir = pattern;
  ServerProcessOptions a;
  a.flags = NodeFlags("node-a");
  a.flags.push_back("--snapshot-dir=" + snapshot_dir);
  absl::StatusOr<std::unique_ptr<ServerProcess>> node_a = ServerProcess::Start(a);
  ASSERT_TRUE(node_a.ok()) << node_a.status();
  ServerProcessOptions b;
  b.flags = NodeFlags("node-b");
  absl::StatusOr<std::unique_ptr<ServerProcess>> node_b = ServerProcess::Start(b);
  ASSERT_TRUE(node_b.ok()) << node_b.status();
  const HostTensor tensor = Pattern(8192, 41);
  {
    std::unique_ptr<Client> client = ConnectClient((*node_a)->address(), RemoteClientOptions());
    ASSERT_TRUE(client->Put("snap/w", tensor.dl()).ok());
  }
  ASSERT_TRUE((*node_a)->Stop(SIGTERM).ok());  // writes the snapshot, leaves the cluster
  // The record outlives the node: while it is away its version is
  // unavailable, not forgotten (and never replaced by an older one).
  EXPECT_EQ(Holders("snap/w"), std::vector<std::string>{"node-a"});
  std::unique_ptr<Client> reader = ConnectClient((*node_b)->address(), RemoteClientOptions());
  absl::StatusOr<Tensor> away = reader->Fetch("snap/w");
  EXPECT_EQ(away.status().code(), absl::StatusCode::kUnavailable) << away.status();
  EXPECT_TRUE(absl::StrContains(away.status().message(), "snap/w")) << away.status();
  absl::StatusOr<std::unique_ptr<ServerProcess>> restarted = ServerProcess::Start(a);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Tensor> fetched = reader->Fetch("snap/w");
        return fetched.ok() && TensorBytes(*fetched) == tensor.storage;
      },
      absl::Seconds(10)))
      << (*restarted)->StderrTail();
  restarted->reset();
  std::system(absl::StrCat("rm -rf '", snapshot_dir, "'").c_str());
}

TEST_F(ClusterReplicationTest, TheLocalHandoffReadsANameAnotherNodeHolds) {
  char pattern[] = "/tmp/tensord-rep-handoff-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string socket = absl::StrCat(pattern, "/handoff.sock");
  ASSERT_NO_FATAL_FAILURE(StartNodes(1));
  ServerProcessOptions b;
  b.flags = NodeFlags("node-b");
  b.flags.push_back("--handoff-socket=" + socket);
  absl::StatusOr<std::unique_ptr<ServerProcess>> node_b = ServerProcess::Start(b);
  ASSERT_TRUE(node_b.ok()) << node_b.status();
  const HostTensor tensor = Pattern(1 << 20, 51);
  ASSERT_TRUE(clients_[0]->Put("hand/w", tensor.dl()).ok());
  ClientOptions options = RemoteClientOptions();
  options.path = TransferPath::kAuto;
  options.handoff_socket = socket;
  std::unique_ptr<Client> local = ConnectClient((*node_b)->address(), options);
  ASSERT_NE(local, nullptr);
  // The handoff waits for node b to copy it (off its event loop) and maps
  // the copy: zero-copy from the first read.
  absl::StatusOr<Tensor> first = local->Fetch("hand/w");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(TensorBytes(*first), tensor.storage);
  EXPECT_TRUE(absl::StrContains(MapsLineOf(first->dl_tensor().data), "memfd:"))
      << MapsLineOf(first->dl_tensor().data);
  absl::StatusOr<Tensor> second = local->Fetch("hand/w");  // the copy, asked of etcd only
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(TensorBytes(*second), tensor.storage);
  EXPECT_TRUE(absl::StrContains(MapsLineOf(second->dl_tensor().data), "memfd:"))
      << MapsLineOf(second->dl_tensor().data);
  // A batch put through node b's handoff: a cluster's puts commit through
  // etcd, which gRPC's BatchPut does, so it goes there, under kLocal too.
  for (TransferPath path : {TransferPath::kAuto, TransferPath::kLocal}) {
    ClientOptions put_options = options;
    put_options.path = path;
    std::unique_ptr<Client> putter = ConnectClient((*node_b)->address(), put_options);
    ASSERT_NE(putter, nullptr);
    const HostTensor small = Pattern(4096, 52 + static_cast<int>(path));
    const std::string name = absl::StrCat("hand/batch-", static_cast<int>(path));
    const std::vector<BatchPutItem> items = {{name, small.dl()}};
    absl::StatusOr<BatchPutResult> put = putter->BatchPut(items);
    ASSERT_TRUE(put.ok()) << put.status();
    ASSERT_TRUE(put->items[0].ok()) << put->items[0].status();
    absl::StatusOr<Tensor> read = clients_[0]->Fetch(name);  // through node a
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(TensorBytes(*read), small.storage);
  }
  first = absl::UnknownError("released");
  second = absl::UnknownError("released");
  local.reset();
  node_b->reset();
  std::system(absl::StrCat("rm -rf '", pattern, "'").c_str());
}

TEST_F(ClusterReplicationTest, ACreateSealWithTwoReplicasReturnsOnceTwoNodesHoldIt) {
  char pattern[] = "/tmp/tensord-rep-create-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string socket = absl::StrCat(pattern, "/handoff.sock");
  ASSERT_NO_FATAL_FAILURE(StartNodes(2));  // node-a, node-b
  ServerProcessOptions c;
  c.flags = NodeFlags("node-c");
  c.flags.push_back("--handoff-socket=" + socket);
  absl::StatusOr<std::unique_ptr<ServerProcess>> node_c = ServerProcess::Start(c);
  ASSERT_TRUE(node_c.ok()) << node_c.status();
  ClientOptions local_options = RemoteClientOptions();
  local_options.path = TransferPath::kAuto;
  local_options.handoff_socket = socket;
  std::unique_ptr<Client> local = ConnectClient((*node_c)->address(), local_options);
  ASSERT_NE(local, nullptr);
  const HostTensor tensor = Pattern(1 << 20, 61);
  CreateOptions options;
  options.replicas = 2;
  absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
      local->Create("made/w", kU8, std::vector<int64_t>{1 << 20}, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE(absl::StrContains(MapsLineOf((*writer)->data()), "memfd:"));  // the local path
  std::memcpy((*writer)->data(), tensor.storage.data(), tensor.storage.size());
  absl::StatusOr<TensorInfo> sealed = (*writer)->Seal(/*send_crc32c=*/true);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  // At the seal's return both copies are registered: no waiting here.
  std::vector<std::string> holders = Holders("made/w");
  ASSERT_EQ(holders.size(), 2u) << ::testing::PrintToString(holders);
  std::sort(holders.begin(), holders.end());  // listed in key order
  EXPECT_EQ(holders[1], "node-c");
  ASSERT_TRUE(holders[0] == "node-a" || holders[0] == "node-b") << holders[0];
  // The other holder serves the bytes from its own copy.
  Client& other = *clients_[holders[0] == "node-a" ? 0 : 1];
  absl::StatusOr<Tensor> fetched = other.Fetch("made/w");
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(TensorBytes(*fetched), tensor.storage);

  // A group: every version of it gets its copies before SealGroup returns.
  std::vector<std::unique_ptr<TensorWriter>> group;
  for (const char* name : {"made/g1", "made/g2"}) {
    absl::StatusOr<std::unique_ptr<TensorWriter>> member =
        local->Create(name, kU8, std::vector<int64_t>{4096}, options);
    ASSERT_TRUE(member.ok()) << member.status();
    std::memset((*member)->data(), 3, 4096);
    group.push_back(*std::move(member));
  }
  absl::StatusOr<SealGroupResult> sealed_group = local->SealGroup(group);
  ASSERT_TRUE(sealed_group.ok()) << sealed_group.status();
  EXPECT_EQ(Holders("made/g1").size(), 2u);
  EXPECT_EQ(Holders("made/g2").size(), 2u);
  // The group has a cluster-wide name, as a BatchPut's has: read whole
  // through every node by it.
  ASSERT_NE(sealed_group->cluster_group, 0u);
  for (const std::unique_ptr<Client>& node : clients_) {
    absl::StatusOr<std::vector<Tensor>> read =
        node->BatchFetchClusterGroup(sealed_group->cluster_group);
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_EQ(read->size(), 2u);
    EXPECT_EQ((*read)[0].info().name, "made/g1");
    EXPECT_EQ(TensorBytes((*read)[1]), std::vector<uint8_t>(4096, 3));
  }

  // More copies than live nodes: refused at Create, before any byte.
  options.replicas = 4;
  absl::StatusOr<std::unique_ptr<TensorWriter>> too_many =
      local->Create("made/x", kU8, std::vector<int64_t>{4096}, options);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kFailedPrecondition) << too_many.status();
  EXPECT_TRUE(
      absl::StrContains(too_many.status().message(), "needs 4 live nodes; the cluster has 3"))
      << too_many.status();
  EXPECT_EQ(local->Stat("made/x").status().code(), absl::StatusCode::kNotFound);
  fetched = absl::UnknownError("released");
  local.reset();
  node_c->reset();
  std::system(absl::StrCat("rm -rf '", pattern, "'").c_str());
}

TEST_F(ClusterReplicationTest, NodesWithTlsPullFromEachOtherOverTls) {
  absl::StatusOr<std::unique_ptr<TestPki>> pki = TestPki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  // Every node serves TLS and requires client certificates from the test CA;
  // nodes a and b trust it for their pulls, node c was not told to.
  const std::vector<std::string> tls = {absl::StrCat("--tls-cert=", (*pki)->Path("server.pem")),
                                        absl::StrCat("--tls-key=", (*pki)->Path("server.key")),
                                        absl::StrCat("--tls-client-ca=", (*pki)->Path("ca.pem"))};
  std::vector<std::string> trusting = tls;
  trusting.push_back(absl::StrCat("--cluster-ca=", (*pki)->Path("ca.pem")));
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  std::vector<std::unique_ptr<Client>> clients;
  for (const char* name : {"node-a", "node-b", "node-c"}) {
    ServerProcessOptions options;
    options.flags = NodeFlags(name);
    const std::vector<std::string>& extra = std::string(name) == "node-c" ? tls : trusting;
    options.flags.insert(options.flags.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
    ASSERT_TRUE(node.ok()) << node.status();
    ClientOptions client = RemoteClientOptions();
    client.tls_root_ca = (*pki)->Path("ca.pem");
    client.tls_client_cert = (*pki)->Path("client.pem");
    client.tls_client_key = (*pki)->Path("client.key");
    clients.push_back(ConnectClient((*node)->address(), client));
    ASSERT_NE(clients.back(), nullptr);
    nodes.push_back(std::move(*node));
  }
  const HostTensor tensor = Pattern(512 << 10, 81);
  ASSERT_TRUE(clients[0]->Put("tls/w", tensor.dl()).ok());
  absl::StatusOr<Tensor> pulled = clients[1]->Fetch("tls/w");
  ASSERT_TRUE(pulled.ok()) << pulled.status() << nodes[1]->StderrTail();
  EXPECT_EQ(TensorBytes(*pulled), tensor.storage);
  // A node that speaks plaintext to TLS peers cannot pull, and says so.
  absl::StatusOr<Tensor> refused = clients[2]->Fetch("tls/w");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "is held by no live node that could serve it"))
      << refused.status();
}

}  // namespace
}  // namespace tensord::testing
