// The cluster's guarantees (docs/cluster.md) checked from the outside: a
// real etcd and three real tensord nodes (each reaching etcd through a
// proxy of its own, each keeping snapshots), clients on every node putting
// unique values, deleting and reading a small set of names, with and
// without copies, every operation recorded with its start and end; while
// they run, faults: kill -9 and restart, SIGTERM and restart from the
// snapshot, SIGSTOP/SIGCONT of a node, etcd paused, etcd killed and
// restarted, a node cut off from etcd. Then:
//   - per name, the history must be linearizable as a register
//     (register_checker: an overwritten or deleted value never read again
//     after the newer write was acknowledged);
//   - no read returned wrong bytes (each value's bytes follow from it);
//   - every replicas=2 write survives the kill of one node.
// TENSORD_CHECK_SECONDS sets how long faults go on (default 40).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/mutex.h"
#include "tensord/client.h"
#include "tests/cluster/history.h"
#include "tests/cluster/register_checker.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/cluster_harness.h"
#include "tests/integration/cluster_test_support.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

constexpr int kNodes = 3;
constexpr int kClientsPerNode = 2;
constexpr int kNames = 8;
// Clients move to fresh names every epoch: each name's history stays short
// enough to decide (writes whose outcome is unknown stay open to the end).
constexpr int64_t kEpochNanos = 2'000'000'000;

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A value's bytes: its number, then bytes that follow from it, so a read
// can tell exactly which value it got and whether every byte is right.
std::vector<uint8_t> ValueBytes(uint64_t value, size_t size) {
  std::vector<uint8_t> bytes(std::max<size_t>(size, 8));
  std::memcpy(bytes.data(), &value, 8);
  std::mt19937_64 random(value);
  for (size_t i = 8; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(random());
  return bytes;
}

// The value a read got, or 0 when its bytes are not any value's.
uint64_t ValueOf(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 8) return 0;
  uint64_t value = 0;
  std::memcpy(&value, bytes.data(), 8);
  if (value == 0 || ValueBytes(value, bytes.size()) != bytes) return 0;
  return value;
}

// Whether a failed write may still have taken effect.
bool MayHaveTakenEffect(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown: return true;
    default: return false;
  }
}

class ConsistencyCheck : public EtcdClusterTest {
 protected:
  // The addresses the clients use, published by the test's thread after
  // every restart.
  struct Directory {
    Mutex mu;
    std::vector<std::string> addresses ABSL_GUARDED_BY(mu);
    std::vector<uint64_t> generations ABSL_GUARDED_BY(mu);
  };

  void Client(int id, int node, std::atomic<bool>& stop, std::atomic<uint64_t>& next_value) {
    std::mt19937 random(1000 + id);
    std::unique_ptr<tensord::Client> client;
    uint64_t connected_generation = 0;
    while (!stop.load()) {
      std::string address;
      uint64_t generation = 0;
      {
        MutexLock lock(&directory_.mu);
        address = directory_.addresses[node];
        generation = directory_.generations[node];
      }
      if (address.empty()) {  // the node is down
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (client == nullptr || generation != connected_generation) {
        ClientOptions options = RemoteClientOptions();
        options.timeout = absl::Seconds(4);
        client = ConnectClient(address, options);
        connected_generation = generation;
        if (client == nullptr) continue;
      }
      Operation op;
      op.client = id;
      op.node = harness_->name(node);
      op.name =
          absl::StrCat("e", (NowNanos() - start_nanos_) / kEpochNanos, "/k", random() % kNames);
      const int kind = static_cast<int>(random() % 20);
      op.called = NowNanos() - start_nanos_;
      if (kind < 8) {
        op.kind = Operation::Kind::kPut;
        op.value = next_value.fetch_add(1);
        op.replicas = random() % 2 == 0 ? 2 : 1;
        static constexpr size_t kSizes[] = {16, 4096, 96 << 10};
        const std::vector<uint8_t> bytes = ValueBytes(op.value, kSizes[random() % 3]);
        const HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(bytes.size())}, bytes);
        PutOptions options;
        options.replicas = op.replicas;
        const absl::Status put = client->Put(op.name, tensor.dl(), options).status();
        op.returned = NowNanos() - start_nanos_;
        if (!put.ok()) {
          if (!MayHaveTakenEffect(put.code())) {
            refused_writes_.fetch_add(1);
            continue;  // no effect: nothing to check
          }
          op.outcome = Operation::Outcome::kUnknown;
          op.detail = put.ToString().substr(0, 160);
        }
      } else if (kind < 10) {
        op.kind = Operation::Kind::kDelete;
        const absl::Status deleted = client->Delete(op.name).status();
        op.returned = NowNanos() - start_nanos_;
        if (deleted.code() == absl::StatusCode::kNotFound) {
          op.outcome = Operation::Outcome::kNotFound;
        } else if (!deleted.ok()) {
          if (!MayHaveTakenEffect(deleted.code())) {
            refused_writes_.fetch_add(1);
            continue;
          }
          op.outcome = Operation::Outcome::kUnknown;
          op.detail = deleted.ToString().substr(0, 160);
        }
      } else {
        op.kind = Operation::Kind::kRead;
        absl::StatusOr<Tensor> read = client->Fetch(op.name);
        op.returned = NowNanos() - start_nanos_;
        if (read.status().code() == absl::StatusCode::kNotFound) {
          op.outcome = Operation::Outcome::kNotFound;
        } else if (!read.ok()) {
          failed_reads_.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          continue;  // says nothing about the register
        } else {
          op.value = ValueOf(TensorBytes(*read));
          if (op.value == 0) {
            MutexLock lock(&anomalies_mu_);
            anomalies_.push_back(absl::StrCat("wrong bytes: ", Describe(op)));
            continue;
          }
        }
      }
      // A client that got no answer waits a little, as a real one would:
      // an outage then leaves a few open writes, not hundreds.
      const bool answered = op.outcome != Operation::Outcome::kUnknown;
      history_.Add(std::move(op));
      if (!answered) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  }

  void Publish() {
    MutexLock lock(&directory_.mu);
    for (size_t i = 0; i < harness_->size(); ++i) {
      directory_.addresses[i] = harness_->running(i) ? harness_->address(i) : std::string();
      directory_.generations[i] = harness_->generation(i);
    }
  }

  void Fault(const std::string& what) {
    faults_.push_back(absl::StrCat((NowNanos() - start_nanos_) / 1000000, "ms ", what));
  }

  // One fault, chosen at random, held for a while, then healed.
  void InjectOne(std::mt19937& random) {
    const size_t node = random() % kNodes;
    const std::string name = harness_->name(node);
    switch (random() % 6) {
      case 0: {
        Fault(absl::StrCat("kill -9 ", name));
        ASSERT_TRUE(harness_->Stop(node, SIGKILL).ok());
        Publish();
        absl::SleepFor(absl::Milliseconds(500 + random() % 1500));
        const absl::Status started = harness_->Start(node);
        ASSERT_TRUE(started.ok()) << started;
        Fault(absl::StrCat("restarted ", name));
        break;
      }
      case 1: {
        Fault(absl::StrCat("SIGTERM ", name, " (snapshot)"));
        ASSERT_TRUE(harness_->Stop(node, SIGTERM).ok());
        Publish();
        const absl::Status started = harness_->Start(node);
        ASSERT_TRUE(started.ok()) << started;
        Fault(absl::StrCat("restarted ", name, " from its snapshot"));
        break;
      }
      case 2:
        Fault(absl::StrCat("SIGSTOP ", name));
        harness_->Pause(node);
        absl::SleepFor(kTtl + absl::Milliseconds(random() % 1500));
        harness_->Resume(node);
        Fault(absl::StrCat("SIGCONT ", name));
        break;
      case 3:
        Fault("etcd paused");
        etcd_->Pause();
        absl::SleepFor(absl::Milliseconds(500 + random() % 2000));
        etcd_->Resume();
        Fault("etcd resumed");
        break;
      case 4: {
        Fault("kill -9 etcd");
        ASSERT_TRUE(etcd_->Stop(SIGKILL).ok());
        absl::SleepFor(absl::Milliseconds(500 + random() % 1000));
        const absl::Status restarted = etcd_->Restart();
        ASSERT_TRUE(restarted.ok()) << restarted << etcd_->LogTail();
        Fault("etcd restarted");
        break;
      }
      case 5:
        Fault(absl::StrCat(name, " cut off from etcd"));
        harness_->CutFromEtcd(node);
        absl::SleepFor(kTtl + absl::Milliseconds(random() % 2000));
        harness_->ReconnectToEtcd(node);
        Fault(absl::StrCat(name, " reconnected to etcd"));
        break;
    }
    Publish();
  }

  // A read of every name of `epoch_prefix` on every running node, into
  // the history.
  void ReadEverything(const std::string& epoch_prefix, const std::string& why) {
    for (size_t node = 0; node < harness_->size(); ++node) {
      if (!harness_->running(node)) continue;
      std::unique_ptr<tensord::Client> client =
          ConnectClient(harness_->address(node), RemoteClientOptions());
      ASSERT_NE(client, nullptr);
      for (int n = 0; n < kNames; ++n) {
        Operation op{.kind = Operation::Kind::kRead,
                     .name = absl::StrCat(epoch_prefix, n),
                     .client = 100 + static_cast<int>(node),
                     .node = harness_->name(node),
                     .detail = why};
        op.called = NowNanos() - start_nanos_;
        absl::StatusOr<Tensor> read = client->Fetch(op.name);
        op.returned = NowNanos() - start_nanos_;
        if (read.status().code() == absl::StatusCode::kNotFound) {
          op.outcome = Operation::Outcome::kNotFound;
        } else if (!read.ok()) {
          final_read_failures_.push_back(
              absl::StrCat(Describe(op), ": ", read.status().ToString()));
          continue;
        } else {
          op.value = ValueOf(TensorBytes(*read));
          if (op.value == 0) {
            MutexLock lock(&anomalies_mu_);
            anomalies_.push_back(absl::StrCat("wrong bytes: ", Describe(op)));
            continue;
          }
        }
        history_.Add(std::move(op));
      }
    }
  }

  std::unique_ptr<ClusterHarness> harness_;
  Directory directory_;
  History history_;
  int64_t start_nanos_ = NowNanos();
  std::atomic<uint64_t> refused_writes_{0};
  std::atomic<uint64_t> failed_reads_{0};
  Mutex anomalies_mu_;
  std::vector<std::string> anomalies_ ABSL_GUARDED_BY(anomalies_mu_);
  std::vector<std::string> faults_;
  std::vector<std::string> final_read_failures_;
};

TEST_F(ConsistencyCheck, RegistersStayLinearizableUnderFaults) {
  int seconds = 40;
  if (const char* text = std::getenv("TENSORD_CHECK_SECONDS"); text != nullptr) {
    ASSERT_TRUE(absl::SimpleAtoi(text, &seconds)) << text;
  }
  harness_ = std::make_unique<ClusterHarness>(*etcd_, "/tensord-check", kTtl);
  for (int i = 0; i < kNodes; ++i) {
    const absl::Status added =
        harness_->Add(HarnessNode{.name = absl::StrCat("node-", std::string(1, 'a' + i)),
                                  .through_proxy = true,
                                  .snapshots = true});
    ASSERT_TRUE(added.ok()) << added;
  }
  {
    MutexLock lock(&directory_.mu);
    directory_.addresses.resize(kNodes);
    directory_.generations.resize(kNodes);
  }
  Publish();
  start_nanos_ = NowNanos();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next_value{1};
  std::vector<std::thread> clients;
  for (int node = 0; node < kNodes; ++node) {
    for (int c = 0; c < kClientsPerNode; ++c) {
      const int id = node * kClientsPerNode + c;
      clients.emplace_back([&, id, node] { Client(id, node, stop, next_value); });
    }
  }
  std::mt19937 random(static_cast<unsigned>(std::random_device()()));
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  absl::SleepFor(absl::Seconds(2));  // some history before the first fault
  while (absl::Now() < end) {
    ASSERT_NO_FATAL_FAILURE(InjectOne(random));
    absl::SleepFor(absl::Milliseconds(1000 + random() % 1500));
  }
  const int64_t last_epoch = (NowNanos() - start_nanos_) / kEpochNanos;
  stop.store(true);
  for (std::thread& thread : clients) thread.join();
  Fault("healed; clients stopped");
  // Every node answers the last names as the history allows.
  absl::SleepFor(kTtl + absl::Seconds(1));
  ASSERT_NO_FATAL_FAILURE(ReadEverything(absl::StrCat("e", last_epoch, "/k"), "after healing"));

  // The survival check: each name gets a put with 2 copies, then one node
  // is killed for good; every name must still read back exactly that.
  std::map<std::string, uint64_t> last_written;
  {
    std::unique_ptr<tensord::Client> writer =
        ConnectClient(harness_->address(0), RemoteClientOptions());
    ASSERT_NE(writer, nullptr);
    for (int n = 0; n < kNames; ++n) {
      Operation op{.kind = Operation::Kind::kPut,
                   .name = absl::StrCat("survive/k", n),
                   .value = next_value.fetch_add(1),
                   .client = 200,
                   .replicas = 2,
                   .node = harness_->name(0),
                   .detail = "survival put"};
      const std::vector<uint8_t> bytes = ValueBytes(op.value, 4096);
      const HostTensor tensor = CompactTensor(kU8, {4096}, bytes);
      PutOptions options;
      options.replicas = 2;
      op.called = NowNanos() - start_nanos_;
      const absl::Status put = writer->Put(op.name, tensor.dl(), options).status();
      op.returned = NowNanos() - start_nanos_;
      ASSERT_TRUE(put.ok()) << op.name << ": " << put << harness_->StderrTails();
      last_written[op.name] = op.value;
      history_.Add(std::move(op));
    }
  }
  const size_t victim = random() % kNodes;
  Fault(absl::StrCat("kill -9 ", harness_->name(victim), " for good"));
  ASSERT_TRUE(harness_->Stop(victim, SIGKILL).ok());
  absl::SleepFor(kTtl + absl::Seconds(1));
  final_read_failures_.clear();
  ASSERT_NO_FATAL_FAILURE(ReadEverything("survive/k", "after one node was lost"));
  std::vector<std::string> lost;
  for (size_t node = 0; node < harness_->size(); ++node) {
    if (!harness_->running(node)) continue;
    std::unique_ptr<tensord::Client> client =
        ConnectClient(harness_->address(node), RemoteClientOptions());
    for (const auto& [name, value] : last_written) {
      absl::StatusOr<Tensor> read = client->Fetch(name);
      if (!read.ok() || ValueOf(TensorBytes(*read)) != value) {
        lost.push_back(absl::StrCat(
            name, " (v", value, ") on ", harness_->name(node), ": ",
            read.ok() ? absl::StrCat("v", ValueOf(TensorBytes(*read))) : read.status().ToString()));
      }
    }
  }

  // The verdict, per name.
  std::vector<Operation> operations = history_.Take();
  std::map<std::string, std::vector<Operation>> by_name;
  std::map<std::string, size_t> counts;
  for (Operation& op : operations) {
    const char* kind = op.kind == Operation::Kind::kPut      ? "put"
                       : op.kind == Operation::Kind::kDelete ? "delete"
                                                             : "read";
    const char* outcome = op.outcome == Operation::Outcome::kOk         ? "ok"
                          : op.outcome == Operation::Outcome::kNotFound ? "not found"
                                                                        : "unknown";
    ++counts[absl::StrCat(kind, " ", outcome)];
    by_name[op.name].push_back(std::move(op));
  }
  std::string report = absl::StrCat("history: ", operations.size(), " operations");
  uint64_t states = 0;
  for (const auto& [what, count] : counts) absl::StrAppend(&report, "; ", what, ": ", count);
  absl::StrAppend(&report, "; writes refused (no effect): ", refused_writes_.load(),
                  "; reads failed: ", failed_reads_.load(), "\nfaults:");
  for (const std::string& fault : faults_) absl::StrAppend(&report, "\n  ", fault);
  size_t largest = 0;
  // The clients have stopped; the lock only keeps the analysis satisfied.
  MutexLock lock(&anomalies_mu_);
  for (auto& [name, ops] : by_name) {
    const size_t count = ops.size();
    largest = std::max(largest, count);
    const CheckResult verdict = CheckRegister(std::move(ops), 2'000'000);
    states += verdict.states;
    if (!verdict.linearizable) {
      absl::StrAppend(&report, "\n", name, ": ", count, " operations, ", verdict.states,
                      " states, ", verdict.undecided ? "UNDECIDED" : "NOT LINEARIZABLE");
      anomalies_.push_back(absl::StrCat(name, ": ", verdict.explanation));
    }
  }
  for (const std::string& loss : lost)
    anomalies_.push_back(absl::StrCat("lost a 2-copy write: ", loss));
  absl::StrAppend(&report, "\nchecked ", by_name.size(), " names (the longest history ", largest,
                  " operations) in ", states, " states; ", anomalies_.size(), " anomalies");
  std::cout << report << std::endl;
  for (const std::string& failure : final_read_failures_) {
    std::cout << "final read failed: " << failure << std::endl;
  }
  EXPECT_TRUE(anomalies_.empty()) << anomalies_.size() << " anomalies:\n"
                                  << absl::StrJoin(anomalies_, "\n") << "\n"
                                  << report << "\n"
                                  << harness_->StderrTails();
}

}  // namespace
}  // namespace tensord::testing
