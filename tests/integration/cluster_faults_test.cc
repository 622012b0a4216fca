// The failures a cluster showed under faults, each a test (docs/cluster.md
// states what must hold): an overwritten version came back after a kill or
// a restart of its newer holder, a paused node held readers for the whole
// pull deadline, a node joining a directory larger than gRPC's default
// message saw nothing, a group was many watch events, a holder was trusted
// whatever it was, and a full etcd stalled in silence.
#include <signal.h>

#include <algorithm>
#include <atomic>
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
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/cluster_harness.h"
#include "tests/integration/cluster_test_support.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

constexpr char kPrefix[] = "/tensord-faults";

class ClusterFaultTest : public EtcdClusterTest {
 protected:
  void StartNodes(std::vector<HarnessNode> nodes) {
    harness_ = std::make_unique<ClusterHarness>(*etcd_, kPrefix, kTtl);
    for (HarnessNode& node : nodes) {
      absl::Status added = harness_->Add(std::move(node));
      ASSERT_TRUE(added.ok()) << added;
    }
  }
  void StartNodes(int count) {
    std::vector<HarnessNode> nodes;
    for (int i = 0; i < count; ++i) {
      nodes.push_back(HarnessNode{.name = absl::StrCat("node-", std::string(1, 'a' + i))});
    }
    StartNodes(std::move(nodes));
  }

  // A client of node `i` as it runs now, with a deadline so a paused node
  // cannot hang the test.
  std::unique_ptr<Client> ClientOf(size_t i, absl::Duration timeout = absl::Seconds(10)) {
    ClientOptions options = RemoteClientOptions();
    options.timeout = timeout;
    return ConnectClient(harness_->address(i), options);
  }

  static HostTensor Pattern(size_t size, uint64_t seed) {
    return CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, seed));
  }

  ::testing::AssertionResult Reads(size_t node, const std::string& name, const HostTensor& want) {
    absl::StatusOr<Tensor> fetched = ClientOf(node)->Fetch(name);
    if (!fetched.ok()) {
      return ::testing::AssertionFailure()
             << name << " on " << harness_->name(node) << ": " << fetched.status();
    }
    const std::vector<uint8_t> bytes = TensorBytes(*fetched);
    return BytesEqual(bytes.data(), bytes.size(), want.storage.data(), want.storage.size());
  }

  // `into` as a FetchInto destination of `shape` (its size) bytes.
  static DLTensor ByteDestination(std::vector<uint8_t>& into, const int64_t& shape) {
    return DLTensor{.data = into.data(),
                    .device = {kDLCPU, 0},
                    .ndim = 1,
                    .dtype = {kDLUInt, 8, 1},
                    .shape = const_cast<int64_t*>(&shape),
                    .strides = nullptr,
                    .byte_offset = 0};
  }

  std::unique_ptr<EtcdClient> Etcd() {
    absl::StatusOr<std::unique_ptr<EtcdClient>> etcd =
        EtcdClient::Create(EtcdClientOptions{.endpoints = {etcd_->endpoint()}});
    EXPECT_TRUE(etcd.ok()) << etcd.status();
    return etcd.ok() ? *std::move(etcd) : nullptr;
  }

  std::unique_ptr<ClusterHarness> harness_;
};

// put x=1 on a, x=2 on b, kill -9 b: a and c used to answer x=1.
TEST_F(ClusterFaultTest, AnOverwrittenVersionNeverComesBackWhenItsNewerHolderIsKilled) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(3));
  const HostTensor one = Pattern(4096, 1);
  const HostTensor two = Pattern(4096, 2);
  ASSERT_TRUE(ClientOf(0)->Put("x", one.dl()).ok());
  ASSERT_TRUE(ClientOf(1)->Put("x", two.dl()).ok());
  ASSERT_TRUE(harness_->Stop(1, SIGKILL).ok());
  for (size_t node : {0u, 2u}) {
    absl::StatusOr<Tensor> read = ClientOf(node)->Fetch("x");
    ASSERT_FALSE(read.ok()) << "node " << harness_->name(node)
                            << " answered an overwritten version";
    EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable) << read.status();
    EXPECT_TRUE(absl::StrContains(read.status().message(), "'x'")) << read.status();
    EXPECT_TRUE(absl::StrContains(read.status().message(), "node-b")) << read.status();
  }
  // Restarted without a snapshot, b has lost x=2: still never x=1.
  ASSERT_TRUE(harness_->Start(1).ok());
  for (size_t node : {0u, 1u, 2u}) {
    EXPECT_EQ(ClientOf(node)->Fetch("x").status().code(), absl::StatusCode::kUnavailable);
  }
  // A new put makes the name readable again everywhere.
  const HostTensor three = Pattern(4096, 3);
  ASSERT_TRUE(ClientOf(2)->Put("x", three.dl()).ok());
  for (size_t node : {0u, 1u, 2u}) EXPECT_TRUE(Reads(node, "x", three));
}

// The same with b restarted by SIGTERM and --snapshot-dir: all three nodes
// used to serve x=1 after the restart.
TEST_F(ClusterFaultTest, AnOverwrittenVersionNeverComesBackAfterItsHolderRestartsFromASnapshot) {
  ASSERT_NO_FATAL_FAILURE(
      StartNodes({HarnessNode{.name = "node-a"}, HarnessNode{.name = "node-b", .snapshots = true},
                  HarnessNode{.name = "node-c"}}));
  const HostTensor one = Pattern(4096, 11);
  const HostTensor two = Pattern(4096, 12);
  ASSERT_TRUE(ClientOf(0)->Put("x", one.dl()).ok());
  ASSERT_TRUE(ClientOf(1)->Put("x", two.dl()).ok());
  ASSERT_TRUE(harness_->Stop(1, SIGTERM).ok());
  ASSERT_TRUE(harness_->Start(1).ok());
  for (size_t node : {0u, 1u, 2u}) EXPECT_TRUE(Reads(node, "x", two)) << harness_->StderrTails();
  // And a snapshot older than the name's latest does not bring its own back.
  const HostTensor three = Pattern(4096, 13);
  ASSERT_TRUE(ClientOf(0)->Put("x", three.dl()).ok());
  ASSERT_TRUE(harness_->Stop(1, SIGKILL).ok());
  ASSERT_TRUE(harness_->Start(1).ok());
  for (size_t node : {0u, 1u, 2u}) EXPECT_TRUE(Reads(node, "x", three));
}

// A delete acknowledged while a node was paused, or before the snapshot it
// restarts from, is not undone by that node.
TEST_F(ClusterFaultTest, AnAcknowledgedDeleteIsNeverUndoneByANodeThatWasAway) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(
      {HarnessNode{.name = "node-a", .snapshots = true}, HarnessNode{.name = "node-b"}}));
  const HostTensor tensor = Pattern(8192, 21);
  ASSERT_TRUE(ClientOf(0)->Put("gone", tensor.dl()).ok());
  ASSERT_TRUE(ClientOf(0)->Snapshot().ok());  // the snapshot holds "gone"
  harness_->Pause(0);
  ASSERT_TRUE(ClientOf(1)->Delete("gone").ok());
  absl::SleepFor(kTtl + absl::Seconds(1));
  harness_->Resume(0);
  EXPECT_EQ(ClientOf(0)->Fetch("gone").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(harness_->Stop(0, SIGKILL).ok());
  ASSERT_TRUE(harness_->Start(0).ok());  // restores the snapshot that holds it
  for (size_t node : {0u, 1u}) {
    EXPECT_EQ(ClientOf(node)->Fetch("gone").status().code(), absl::StatusCode::kNotFound)
        << harness_->StderrTails();
  }
  EXPECT_TRUE(absl::StrContains(harness_->process(0).Stderr(), "dropped=1"))
      << harness_->process(0).StderrTail();
}

// put w --replicas 2 on a (copy on b), SIGSTOP a, fetch w on c: the fetch
// used to hang for the whole 20 s window.
TEST_F(ClusterFaultTest, APausedHolderDoesNotHoldReadersBack) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(3));
  const HostTensor tensor = Pattern(1 << 20, 31);
  PutOptions two;
  two.replicas = 2;
  absl::StatusOr<TensorInfo> put = ClientOf(0)->Put("w", tensor.dl(), two);
  ASSERT_TRUE(put.ok()) << put.status();
  harness_->Pause(0);
  // Node c may try a first (still listed until its TTL runs out): it gives
  // up on it and reads b's copy within TTL + 2 s.
  for (size_t node : {1u, 2u}) {
    const absl::Time start = absl::Now();
    EXPECT_TRUE(Reads(node, "w", tensor)) << harness_->StderrTails();
    EXPECT_LT(absl::Now() - start, kTtl + absl::Seconds(2)) << harness_->name(node);
  }
  harness_->Resume(0);
}

// A large version another node holds is passed to its first reader as the
// bytes arrive (FillingVersion): the reader gets every byte, and the
// version number this node gave its copy once whole (sent last, in the
// stream's trailer).
TEST_F(ClusterFaultTest, AFirstReaderThroughAnotherNodeGetsTheCopyAsItArrives) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(2));
  const HostTensor tensor = Pattern(24 << 20, 43);
  ASSERT_TRUE(ClientOf(0)->Put("big", tensor.dl()).ok());
  std::vector<uint8_t> into(tensor.storage.size());
  const int64_t shape = static_cast<int64_t>(into.size());
  const DLTensor out = ByteDestination(into, shape);
  FetchOptions verified;
  verified.verify_crc32c = true;
  std::unique_ptr<Client> reader = ClientOf(1);
  absl::StatusOr<TensorInfo> fetched = reader->FetchInto("big", out, verified);
  ASSERT_TRUE(fetched.ok()) << fetched.status() << harness_->StderrTails();
  EXPECT_TRUE(BytesEqual(into.data(), into.size(), tensor.storage.data(), tensor.storage.size()));
  ASSERT_NE(fetched->version, 0u);
  // The number is that of node b's own copy.
  absl::StatusOr<TensorInfo> copy = reader->Stat("big", fetched->version);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->total_bytes, tensor.storage.size());
  EXPECT_EQ(copy->crc32c, fetched->crc32c);
  // A range of it, read while nothing is cached on a third reader's side.
  std::string range;
  ASSERT_TRUE(reader->FetchBytes("big", 5 << 20, 4096, range).ok());
  EXPECT_TRUE(BytesEqual(reinterpret_cast<const uint8_t*>(range.data()), range.size(),
                         tensor.storage.data() + (5 << 20), 4096));

  // A plain Fetch asks FetchInline first, which answers a split header
  // naming version 0 once the copy is announced; the client then streams
  // it as it arrives.
  const HostTensor other = Pattern(12 << 20, 44);
  ASSERT_TRUE(ClientOf(0)->Put("big2", other.dl()).ok());
  absl::StatusOr<Tensor> plain = ClientOf(1)->Fetch("big2", verified);
  ASSERT_TRUE(plain.ok()) << plain.status() << harness_->StderrTails();
  const std::vector<uint8_t> plain_bytes = TensorBytes(*plain);
  EXPECT_TRUE(BytesEqual(plain_bytes.data(), plain_bytes.size(), other.storage.data(),
                         other.storage.size()));
  EXPECT_NE(plain->info().version, 0u);
}

// The holder a first reader's bytes come from pauses mid-copy: the copy
// starts again from the other holder, and the reader, already sent part of
// it, gets the rest, whole and right, within the stall timeout and a
// second copy's time.
TEST_F(ClusterFaultTest, AFirstReaderWhoseHolderPausesMidCopyGetsTheRestFromAnother) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(3));
  const HostTensor tensor = Pattern(32 << 20, 47);
  PutOptions two;
  two.replicas = 2;
  // Sanitized builds move bytes many times slower: deadlines to match.
  absl::StatusOr<TensorInfo> put = ClientOf(0, absl::Seconds(60))->Put("pausing", tensor.dl(), two);
  ASSERT_TRUE(put.ok()) << put.status();
  // The node holding no copy, and the holders.
  size_t reader_node = 3;
  std::vector<size_t> holders;
  for (size_t node = 0; node < 3; ++node) {
    absl::StatusOr<std::vector<TensorInfo>> held = ClientOf(node)->ListAll("pausing");
    ASSERT_TRUE(held.ok()) << held.status();
    if (held->empty()) {
      reader_node = node;
    } else {
      holders.push_back(node);
    }
  }
  ASSERT_LT(reader_node, 3u);
  ASSERT_EQ(holders.size(), 2u);
  std::vector<uint8_t> into(tensor.storage.size());
  const int64_t shape = static_cast<int64_t>(into.size());
  const DLTensor out = ByteDestination(into, shape);
  FetchOptions options;
  options.verify_crc32c = true;
  options.streams = 1;
  // What reading it from a live holder takes here, for the bound below.
  const absl::Time direct_start = absl::Now();
  ASSERT_TRUE(ClientOf(holders[1], absl::Seconds(60))->FetchInto("pausing", out, options).ok());
  const absl::Duration direct = absl::Now() - direct_start;
  // The writer is listed first, so tried first: paused at the first bytes.
  std::atomic<bool> paused{false};
  options.progress = [&](uint64_t done, uint64_t) {
    if (done > 0 && !paused.exchange(true)) harness_->Pause(holders[0]);
  };
  const absl::Time start = absl::Now();
  std::fill(into.begin(), into.end(), 0);
  absl::StatusOr<TensorInfo> fetched =
      ClientOf(reader_node, absl::Seconds(60))->FetchInto("pausing", out, options);
  const absl::Duration took = absl::Now() - start;
  if (paused.load()) harness_->Resume(holders[0]);
  ASSERT_TRUE(fetched.ok()) << fetched.status() << harness_->StderrTails();
  EXPECT_TRUE(BytesEqual(into.data(), into.size(), tensor.storage.data(), tensor.storage.size()));
  // The stall watchdog (2 s) and a second copy, not a pull deadline.
  EXPECT_LT(took, kTtl + absl::Seconds(4) + 3 * direct) << "direct: " << direct;
}

// A reader whose only holder is paused is answered (UNAVAILABLE) within
// TTL + 2 s, not left waiting on the pull.
TEST_F(ClusterFaultTest, AReaderOfAPausedSoleHolderIsAnsweredWithinTheTtl) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(2));
  const HostTensor tensor = Pattern(256 << 10, 41);
  ASSERT_TRUE(ClientOf(0)->Put("solo", tensor.dl()).ok());
  harness_->Pause(0);
  const absl::Time start = absl::Now();
  absl::StatusOr<Tensor> read = ClientOf(1, absl::Seconds(20))->Fetch("solo");
  EXPECT_LT(absl::Now() - start, kTtl + absl::Seconds(2));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "'solo'")) << read.status();
  harness_->Resume(0);
  // Back in the cluster (its lease may have lapsed: it registers again).
  EXPECT_TRUE(WaitUntil([&] { return bool(Reads(1, "solo", tensor)); }, absl::Seconds(10)))
      << harness_->StderrTails();
}

// A node cut off from etcd refuses what etcd must order and serves its
// cache names; the others go on; the cut node catches up when it returns.
TEST_F(ClusterFaultTest, ANodeCutOffFromEtcdRefusesWhatEtcdMustOrder) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(
      {HarnessNode{.name = "node-a", .through_proxy = true}, HarnessNode{.name = "node-b"}}));
  const HostTensor before = Pattern(4096, 51);
  const HostTensor after = Pattern(4096, 52);
  PutOptions cache;
  cache.retention = Retention::kCache;
  ASSERT_TRUE(ClientOf(0)->Put("d", before.dl()).ok());
  ASSERT_TRUE(ClientOf(0)->Put("c", before.dl(), cache).ok());
  harness_->CutFromEtcd(0);
  ASSERT_TRUE(ClientOf(1)->Put("d", after.dl()).ok());  // the side with etcd writes
  std::unique_ptr<Client> cut = ClientOf(0);
  absl::StatusOr<Tensor> read = cut->Fetch("d");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable)
      << "a cut-off node must not answer its overwritten copy: " << read.status();
  // Writes are refused; whether etcd got them anyway is not known (their
  // outcome is unknown, as for any write that lost its answer): other names.
  EXPECT_EQ(cut->Put("e", before.dl()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(cut->Delete("c").status().code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<Tensor> cached = cut->Fetch("c");
  EXPECT_TRUE(cached.ok()) << cached.status();
  EXPECT_TRUE(Reads(1, "d", after));
  harness_->ReconnectToEtcd(0);
  ::testing::AssertionResult last = ::testing::AssertionFailure();
  EXPECT_TRUE(WaitUntil(
      [&] {
        last = Reads(0, "d", after);
        return bool(last);
      },
      absl::Seconds(10)))
      << last.message() << "\n"
      << harness_->StderrTails();
  // Whatever became of the unanswered put, every node answers the same.
  absl::StatusOr<Tensor> e_on_a = ClientOf(0)->Fetch("e");
  absl::StatusOr<Tensor> e_on_b = ClientOf(1)->Fetch("e");
  ASSERT_EQ(e_on_a.status().code(), e_on_b.status().code()) << e_on_a.status() << e_on_b.status();
  if (e_on_a.ok()) {
    EXPECT_EQ(TensorBytes(*e_on_a), before.storage);
    EXPECT_EQ(TensorBytes(*e_on_b), before.storage);
  }
}

// 30,000 names (over 4 MiB of records): a node joining later used to list
// none ("Received message larger than max") and, once the big node was
// killed, every other node's watch failed in a loop.
TEST_F(ClusterFaultTest, ADirectoryBeyondGrpcsMessageLimitIsListedAndWatchedAcrossAKill) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(3));
  constexpr int kNames = 30000;
  const std::vector<uint8_t> bytes(64, 7);
  const HostTensor small = CompactTensor(kU8, {64}, bytes);
  std::unique_ptr<Client> big = ClientOf(0, absl::Seconds(120));
  std::vector<BatchPutItem> items;
  for (int i = 0; i < kNames; ++i) {
    // Long names: the records of the whole directory exceed 4 MiB.
    items.push_back(BatchPutItem{.name = absl::StrCat("many/", std::string(96, 'n'), "/", i),
                                 .tensor = small.dl()});
  }
  absl::StatusOr<BatchPutResult> put = big->BatchPut(items);
  ASSERT_TRUE(put.ok()) << put.status();
  for (const absl::StatusOr<TensorInfo>& item : put->items) ASSERT_TRUE(item.ok()) << item.status();
  // A node that joins now lists every name, page by page.
  ServerProcessOptions late;
  late.flags = harness_->JoinFlags("node-d", etcd_->endpoint());
  absl::StatusOr<std::unique_ptr<ServerProcess>> joined = ServerProcess::Start(late);
  ASSERT_TRUE(joined.ok()) << joined.status();
  std::unique_ptr<Client> d = ConnectClient((*joined)->address(), RemoteClientOptions());
  size_t listed = 0;
  std::string token;
  do {
    absl::StatusOr<ListResult> page = d->ListCluster("many/", 1000, token);
    ASSERT_TRUE(page.ok()) << page.status();
    listed += page->tensors.size();
    token = page->next_page_token;
  } while (!token.empty());
  EXPECT_EQ(listed, static_cast<size_t>(kNames));
  // A cluster watch on c, then the big node dies.
  WatchOptions options;
  options.cluster = true;
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = ClientOf(2)->Watch("after/", options);
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(harness_->Stop(0, SIGKILL).ok());
  absl::SleepFor(kTtl + absl::Seconds(1));
  ASSERT_TRUE(ClientOf(1)->Put("after/kill", small.dl()).ok());
  absl::StatusOr<WatchEvent> event = (*watch)->Next(absl::Seconds(5));
  ASSERT_TRUE(event.ok()) << event.status() << harness_->StderrTails();
  ASSERT_EQ(event->items.size(), 1u);
  EXPECT_EQ(event->items[0].name, "after/kill");
  // The dead node's names are listed still (their records outlive it) and
  // read as unavailable, not missing or old.
  absl::StatusOr<ListResult> page = d->ListCluster("many/", 10);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->tensors.size(), 10u);
  EXPECT_EQ(d->Fetch(page->tensors[0].name).status().code(), absl::StatusCode::kUnavailable);
}

// An atomic put-many of 200 tensors used to show up on another node's
// cluster watch as 200 events.
TEST_F(ClusterFaultTest, AnAtomicGroupIsOneClusterWatchEvent) {
  // etcd and the nodes allow transactions of 256 keys: the group's 200
  // records and its own in one.
  etcd_.reset();
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd =
      EtcdProcess::Start(absl::Seconds(30), std::nullopt, {"--max-txn-ops=256"});
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  etcd_ = *std::move(etcd);
  ASSERT_NO_FATAL_FAILURE(
      StartNodes({HarnessNode{.name = "node-a", .flags = {"--etcd-max-txn-ops=256"}},
                  HarnessNode{.name = "node-c", .flags = {"--etcd-max-txn-ops=256"}}}));
  WatchOptions options;
  options.cluster = true;
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = ClientOf(1)->Watch("group/", options);
  ASSERT_TRUE(watch.ok()) << watch.status();
  const std::vector<uint8_t> bytes(256, 9);
  const HostTensor small = CompactTensor(kU8, {256}, bytes);
  std::vector<BatchPutItem> items;
  for (int i = 0; i < 200; ++i) {
    items.push_back(BatchPutItem{.name = absl::StrCat("group/", i), .tensor = small.dl()});
  }
  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> put = ClientOf(0)->BatchPut(items, atomic);
  ASSERT_TRUE(put.ok()) << put.status();
  for (const absl::StatusOr<TensorInfo>& item : put->items) ASSERT_TRUE(item.ok()) << item.status();
  size_t items_seen = 0;
  absl::StatusOr<WatchEvent> event = (*watch)->Next(absl::Seconds(5));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE(event->atomic_group);
  items_seen += event->items.size();
  EXPECT_EQ(items_seen, 200u) << "one event carries the whole group";
  absl::StatusOr<WatchEvent> more = (*watch)->Next(absl::Milliseconds(500));
  EXPECT_EQ(more.status().code(), absl::StatusCode::kDeadlineExceeded) << "a second event came";
  // Larger than a transaction: refused whole, naming the limit.
  for (int i = 200; i < 300; ++i) {
    items.push_back(BatchPutItem{.name = absl::StrCat("group/", i), .tensor = small.dl()});
  }
  absl::StatusOr<BatchPutResult> too_big = ClientOf(0)->BatchPut(items, atomic);
  ASSERT_TRUE(too_big.ok()) << too_big.status();
  ASSERT_FALSE(too_big->items[0].ok());
  EXPECT_EQ(too_big->items[0].status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(too_big->items[0].status().message(), "--etcd-max-txn-ops"))
      << too_big->items[0].status();
}

// A group's etcd revision names it on every node: a reader anywhere gets
// all of that group's versions, copied from the writer, or NOT_FOUND once
// an item moved on; never a mix of two groups.
TEST_F(ClusterFaultTest, AnAtomicGroupIsReadWholeThroughAnyNodeByItsClusterVersion) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(2));
  WatchOptions options;
  options.cluster = true;
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = ClientOf(1)->Watch("grp/", options);
  ASSERT_TRUE(watch.ok()) << watch.status();
  auto put_group = [&](int first_item, int count, uint64_t seed) -> absl::StatusOr<BatchPutResult> {
    std::vector<HostTensor> tensors;
    for (int i = 0; i < count; ++i) tensors.push_back(Pattern(1000 + 64 * i, seed + i));
    std::vector<BatchPutItem> items;
    for (int i = 0; i < count; ++i) {
      items.push_back(
          BatchPutItem{.name = absl::StrCat("grp/", first_item + i), .tensor = tensors[i].dl()});
    }
    BatchPutOptions atomic;
    atomic.atomic = true;
    absl::StatusOr<BatchPutResult> put = ClientOf(0)->BatchPut(items, atomic);
    if (put.ok()) {
      for (const absl::StatusOr<TensorInfo>& item : put->items) {
        if (!item.ok()) return item.status();
      }
    }
    return put;
  };
  absl::StatusOr<BatchPutResult> first = put_group(0, 20, 100);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_NE(first->cluster_group, 0u);
  absl::StatusOr<WatchEvent> event = (*watch)->Next(absl::Seconds(5));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE(event->atomic_group);
  EXPECT_EQ(event->version, first->cluster_group) << "the watch reports the group by its revision";

  for (size_t node : {size_t{1}, size_t{0}}) {
    absl::StatusOr<std::vector<Tensor>> group =
        ClientOf(node)->BatchFetchClusterGroup(first->cluster_group);
    ASSERT_TRUE(group.ok()) << "node " << node << ": " << group.status();
    ASSERT_EQ(group->size(), 20u);
    // Name order: grp/0, grp/1, grp/10, ...
    std::vector<std::string> names;
    for (int i = 0; i < 20; ++i) names.push_back(absl::StrCat("grp/", i));
    std::sort(names.begin(), names.end());
    for (size_t i = 0; i < names.size(); ++i) {
      const int item = std::stoi(names[i].substr(4));
      EXPECT_EQ((*group)[i].info().name, names[i]);
      EXPECT_EQ(TensorBytes((*group)[i]), Pattern(1000 + 64 * item, 100 + item).storage)
          << "node " << node << ", " << names[i];
    }
  }

  // A later group overwrites half of the items: the first is no longer
  // whole anywhere, the second is read whole.
  absl::StatusOr<BatchPutResult> second = put_group(10, 20, 500);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->cluster_group, first->cluster_group);
  absl::Status broken = ClientOf(1)->BatchFetchClusterGroup(first->cluster_group).status();
  EXPECT_EQ(broken.code(), absl::StatusCode::kNotFound) << broken;
  EXPECT_TRUE(absl::StrContains(broken.message(), "no longer whole")) << broken;
  absl::StatusOr<std::vector<Tensor>> whole =
      ClientOf(1)->BatchFetchClusterGroup(second->cluster_group);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), 20u);
  for (const Tensor& tensor : *whole) {
    const int item = std::stoi(tensor.info().name.substr(4));
    EXPECT_EQ(TensorBytes(tensor), Pattern(1000 + 64 * (item - 10), 500 + item - 10).storage)
        << tensor.info().name;
  }

  // A revision that ordered a single put, not a group; one far ahead.
  ASSERT_TRUE(ClientOf(0)->Put("grp/single", Pattern(100, 7).dl()).ok());
  absl::StatusOr<WatchEvent> single;
  do {
    single = (*watch)->Next(absl::Seconds(5));
    ASSERT_TRUE(single.ok()) << single.status();
  } while (single->atomic_group);
  absl::Status not_a_group = ClientOf(1)->BatchFetchClusterGroup(single->version).status();
  EXPECT_EQ(not_a_group.code(), absl::StatusCode::kNotFound) << not_a_group;
  EXPECT_TRUE(absl::StrContains(not_a_group.message(), "outside any group")) << not_a_group;
  EXPECT_EQ(ClientOf(1)->BatchFetchClusterGroup(second->cluster_group + 1'000'000).status().code(),
            absl::StatusCode::kNotFound);

  // A deleted item breaks the group too.
  ASSERT_TRUE(ClientOf(0)->Delete("grp/15").ok());
  absl::Status deleted = ClientOf(1)->BatchFetchClusterGroup(second->cluster_group).status();
  EXPECT_EQ(deleted.code(), absl::StatusCode::kNotFound) << deleted;
  EXPECT_TRUE(absl::StrContains(deleted.message(), "grp/15")) << deleted;

  // A revision after which no name record changed makes a lookup wait out
  // its patience (2 s): a node runs 4 such lookups at once and refuses
  // more, naming the limit, so readers cannot take the threads pulls need.
  std::unique_ptr<EtcdClient> etcd = Etcd();
  ASSERT_NE(etcd, nullptr);
  const KvOp elsewhere = KvOp::Put("/not-tensord/key", "x");
  absl::StatusOr<KvTxnResult> quiet = etcd->Txn({}, {&elsewhere, 1}, {});
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  std::vector<std::unique_ptr<Client>> readers;
  for (int i = 0; i < 6; ++i) readers.push_back(ClientOf(1));
  std::atomic<int> exhausted{0};
  std::atomic<int> not_found{0};
  std::vector<std::thread> lookups;
  for (std::unique_ptr<Client>& reader : readers) {
    lookups.emplace_back([&, client = reader.get()] {
      const absl::Status status =
          client->BatchFetchClusterGroup(static_cast<uint64_t>(quiet->revision)).status();
      if (status.code() == absl::StatusCode::kResourceExhausted &&
          absl::StrContains(status.message(), "4 group lookups")) {
        ++exhausted;
      } else if (status.code() == absl::StatusCode::kNotFound) {
        ++not_found;
      } else {
        ADD_FAILURE() << status;
      }
    });
  }
  for (std::thread& lookup : lookups) lookup.join();
  EXPECT_GE(exhausted.load(), 2);
  EXPECT_EQ(exhausted.load() + not_found.load(), 6);
}

// A group stays readable by its cluster version after etcd compacted the
// revision that ordered it (nodes compact every second here): its index
// key says which names it has. Once an item is overwritten the key goes,
// and the group is NOT_FOUND.
TEST_F(ClusterFaultTest, AWholeGroupIsReadByItsClusterVersionAfterEtcdCompactedIt) {
  ASSERT_NO_FATAL_FAILURE(
      StartNodes({HarnessNode{.name = "node-a", .flags = {"--etcd-compaction-interval=1s"}},
                  HarnessNode{.name = "node-b", .flags = {"--etcd-compaction-interval=1s"}}}));
  std::vector<HostTensor> tensors;
  std::vector<BatchPutItem> items;
  for (int i = 0; i < 5; ++i) tensors.push_back(Pattern(4096 + i, 700 + i));
  for (int i = 0; i < 5; ++i) {
    items.push_back(BatchPutItem{.name = absl::StrCat("kept/", i), .tensor = tensors[i].dl()});
  }
  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> put = ClientOf(0)->BatchPut(items, atomic);
  ASSERT_TRUE(put.ok()) << put.status();
  for (const absl::StatusOr<TensorInfo>& item : put->items) ASSERT_TRUE(item.ok()) << item.status();
  const int64_t group = static_cast<int64_t>(put->cluster_group);
  ASSERT_GT(group, 0);

  std::unique_ptr<EtcdClient> etcd = Etcd();
  ASSERT_NE(etcd, nullptr);
  const std::string records = NameRecordPrefix(kPrefix);
  // Writes move etcd on; compaction passes the group's revision within a
  // few rounds.
  bool compacted = false;
  for (int round = 0; round < 100 && !compacted; ++round) {
    ASSERT_TRUE(ClientOf(0)->Put("kept/other", Pattern(64, round).dl()).ok());
    compacted = etcd->Range(records, KvPrefixEnd(records), group, 1).status().code() ==
                absl::StatusCode::kOutOfRange;
    if (!compacted) absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(compacted) << "etcd never compacted past revision " << group;

  absl::StatusOr<std::vector<Tensor>> whole =
      ClientOf(1)->BatchFetchClusterGroup(put->cluster_group);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ((*whole)[i].info().name, absl::StrCat("kept/", i));
    EXPECT_EQ(TensorBytes((*whole)[i]), tensors[i].storage) << "kept/" << i;
  }

  const std::string index = absl::StrCat(kPrefix, "/groups/");
  auto index_keys = [&] {
    absl::StatusOr<KvPage> page = etcd->Range(index, KvPrefixEnd(index), 0, 0);
    EXPECT_TRUE(page.ok()) << page.status();
    return page.ok() ? page->values.size() : size_t{99};
  };
  EXPECT_EQ(index_keys(), 1u);
  ASSERT_TRUE(ClientOf(1)->Put("kept/3", Pattern(100, 1).dl()).ok());
  absl::Status broken = ClientOf(0)->BatchFetchClusterGroup(put->cluster_group).status();
  EXPECT_EQ(broken.code(), absl::StatusCode::kNotFound) << broken;
  // The key goes right after the put's answer.
  for (int i = 0; i < 50 && index_keys() != 0; ++i) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(index_keys(), 0u) << "the broken group's index key stayed in etcd";
}

// A token that may not read one item of a group gets none of it, and the
// node copies nothing for it.
TEST_F(ClusterFaultTest, AClusterGroupIsReadOnlyWithATokenForEveryItem) {
  const std::string tokens_path = ::testing::TempDir() + "/tokens-group";
  {
    std::FILE* file = std::fopen(tokens_path.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("admin-token-0123456789abcdef admin\nteam-a-token-0123456789abcdef read team-a/\n",
               file);
    std::fclose(file);
  }
  // Node b checks tokens; node a (the writer, pulled from) does not.
  ASSERT_NO_FATAL_FAILURE(
      StartNodes({HarnessNode{.name = "node-a"},
                  HarnessNode{.name = "node-b", .flags = {"--tokens-file=" + tokens_path}}}));
  const HostTensor a = Pattern(300, 1);
  const HostTensor b = Pattern(300, 2);
  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> put =
      ClientOf(0)->BatchPut(std::vector<BatchPutItem>{{.name = "team-a/x", .tensor = a.dl()},
                                                      {.name = "team-b/y", .tensor = b.dl()}},
                            atomic);
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_NE(put->cluster_group, 0u);
  auto reader = [&](const char* token) {
    ClientOptions options = RemoteClientOptions(token);
    options.timeout = absl::Seconds(10);
    return ConnectClient(harness_->address(1), options);
  };
  const absl::Status refused =
      reader("team-a-token-0123456789abcdef")->BatchFetchClusterGroup(put->cluster_group).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "team-b/y")) << refused;
  EXPECT_EQ(harness_->process(1).Stderr().find("cluster_pulled"), std::string::npos)
      << "node b copied items for a reader it refused";
  absl::StatusOr<std::vector<Tensor>> group =
      reader("admin-token-0123456789abcdef")->BatchFetchClusterGroup(put->cluster_group);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->size(), 2u);
  EXPECT_EQ(TensorBytes((*group)[0]), a.storage);
  EXPECT_EQ(TensorBytes((*group)[1]), b.storage);
}

// A record's holders are trusted only as live members at their registered
// address: a record naming a node that is not one is never contacted.
TEST_F(ClusterFaultTest, AHolderThatIsNotALiveMemberIsNeverUsed) {
  ASSERT_NO_FATAL_FAILURE(StartNodes(1));
  std::unique_ptr<EtcdClient> etcd = Etcd();
  ASSERT_NE(etcd, nullptr);
  const NameRecord forged{.name = "forged",
                          .writer = "intruder",
                          .total_bytes = 4,
                          .crc32c = 1,
                          .holders = {"intruder"}};
  const KvOp write = KvOp::Put(NameRecordKey(kPrefix, "forged"), EncodeNameRecord(forged, false));
  ASSERT_TRUE(etcd->Txn({}, {&write, 1}, {}).ok());
  absl::StatusOr<Tensor> read = ClientOf(0)->Fetch("forged");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "intruder: not a live member"))
      << read.status();
}

// Replicate and copies between nodes need a node's identity (the cluster
// permission), not a writer's token; the node token needs TLS.
TEST_F(ClusterFaultTest, NodeToNodeCallsNeedTheClusterPermission) {
  const std::string tokens_path = ::testing::TempDir() + "/tokens-cluster";
  {
    std::FILE* file = std::fopen(tokens_path.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("writer-token-0123456789 read,write\n", file);
    std::fclose(file);
  }
  ASSERT_NO_FATAL_FAILURE(
      StartNodes({HarnessNode{.name = "node-a", .flags = {"--tokens-file=" + tokens_path}}}));
  std::unique_ptr<RawStub> stub = NewRawStub(harness_->address(0));
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  context->AddMetadata("authorization", "Bearer writer-token-0123456789");
  v1::ReplicateRequest request;
  request.set_name("x");
  request.set_source_node("node-a");
  request.set_origin(5);
  v1::ReplicateResponse response;
  const grpc::Status refused = stub->Replicate(context.get(), request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "cluster")) << refused.error_message();
  // A node given a token but no CA to send it over TLS does not start.
  ServerProcessOptions plaintext;
  plaintext.flags = harness_->JoinFlags("node-b", etcd_->endpoint());
  plaintext.flags.push_back("--cluster-token-file=" + tokens_path);
  absl::StatusOr<std::unique_ptr<ServerProcess>> refused_start = ServerProcess::Start(plaintext);
  ASSERT_FALSE(refused_start.ok());
  EXPECT_TRUE(absl::StrContains(refused_start.status().message(), "needs --cluster-ca"))
      << refused_start.status();
}

// etcd's quota full (its NOSPACE alarm) is an error that says so, not a stall.
TEST_F(ClusterFaultTest, AFullEtcdIsANamedError) {
  etcd_.reset();
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd =
      EtcdProcess::Start(absl::Seconds(30), std::nullopt, {"--quota-backend-bytes=16777216"});
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  etcd_ = *std::move(etcd);
  ASSERT_NO_FATAL_FAILURE(StartNodes(1));
  // Fill the quota with what any etcd user may write.
  std::unique_ptr<EtcdClient> client = Etcd();
  ASSERT_NE(client, nullptr);
  const std::string filler(1 << 20, 'f');
  absl::Status filled;
  for (int i = 0; i < 64 && filled.ok(); ++i) {
    const KvOp write = KvOp::Put(absl::StrCat("/filler/", i), filler);
    filled = client->Txn({}, {&write, 1}, {}).status();
  }
  ASSERT_EQ(filled.code(), absl::StatusCode::kResourceExhausted) << filled;
  const HostTensor tensor = Pattern(4096, 61);
  absl::StatusOr<TensorInfo> put = ClientOf(0)->Put("full", tensor.dl());
  EXPECT_EQ(put.status().code(), absl::StatusCode::kResourceExhausted) << put.status();
  EXPECT_TRUE(absl::StrContains(put.status().message(), "NOSPACE")) << put.status();
  EXPECT_TRUE(absl::StrContains(put.status().message(), "alarm disarm")) << put.status();
}

}  // namespace
}  // namespace tensord::testing
