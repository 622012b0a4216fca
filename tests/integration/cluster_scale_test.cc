// A million durable names on one node of a three-node cluster, with
// tensord's default flags (a 2 s lease TTL, as in every cluster test): every
// put succeeds in batched etcd transactions, a node that joins afterwards
// starts at once and lists them page by page (no etcd answer over gRPC's
// default 4 MiB), nodes that hold none of them pay no memory per name, reads
// through another node are byte-exact, and a kill -9 of the holder leaves
// the others' watches and listings working. Prints the figures the issue
// asks for: put rate, join time, listing time, memory per name on the
// holder and on the others, etcd's database size. Its own CTest (label
// "scale"), not under sanitizers; TENSORD_CLUSTER_SCALE_NAMES=N for fewer.
#include <signal.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/cluster_harness.h"
#include "tests/integration/cluster_test_support.h"
#include "tests/integration/process_memory.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

constexpr char kPrefix[] = "/tensord-scale";
constexpr int64_t kTensorBytes = 64;
constexpr size_t kBatchItems = 1000;
constexpr int kClients = 4;
// Bounded in time as well as count: a cluster too slow for this fails with
// the count it reached, not a hang.
constexpr absl::Duration kTimeLimit = absl::Minutes(10);

uint64_t NameCount() {
  if (const char* count = std::getenv("TENSORD_CLUSTER_SCALE_NAMES")) {
    uint64_t parsed = 0;
    if (absl::SimpleAtoi(count, &parsed) && parsed > 0) return parsed;
  }
  return 1'000'000;
}

std::string Name(uint64_t index) { return absl::StrCat("scale/", index); }

// Tensor i: its index in the first 8 bytes, then a pattern of the index.
void FillTensor(uint64_t index, std::vector<uint8_t>& bytes) {
  std::memcpy(bytes.data(), &index, sizeof(index));
  for (size_t at = sizeof(index); at < bytes.size(); ++at) {
    bytes[at] = static_cast<uint8_t>(index * 31 + at);
  }
}

uint64_t FileBytes(const std::filesystem::path& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  return error ? 0 : static_cast<uint64_t>(size);
}

double KibPerName(const ProcessMemory& before, const ProcessMemory& after, uint64_t names) {
  const uint64_t grown = after.anon_kib - std::min(after.anon_kib, before.anon_kib);
  return static_cast<double>(grown) * 1024.0 / static_cast<double>(names);
}

class ClusterScaleTest : public EtcdClusterTest {};

TEST_F(ClusterScaleTest, AMillionNamesOnOneNodeOfThree) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a million puts under a sanitizer take far longer than the point needs";
#endif
  const uint64_t count = NameCount();
  ClusterHarness harness(*etcd_, kPrefix);
  for (const char* name : {"node-a", "node-b", "node-c"}) {
    absl::Status added = harness.Add(HarnessNode{.name = name, .flags = {"--log-level=warning"}});
    ASSERT_TRUE(added.ok()) << added;
  }
  const ProcessMemory holder_before = MemoryOf(harness.process(0).pid());
  const ProcessMemory other_before = MemoryOf(harness.process(1).pid());

  // Every name put on node a, in batches from four clients.
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> stored{0};
  std::atomic<bool> out_of_time{false};
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + kTimeLimit;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      ClientOptions options = RemoteClientOptions();
      options.timeout = absl::Seconds(120);
      std::unique_ptr<Client> client = ConnectClient(harness.address(0), options);
      if (client == nullptr) {
        failures.fetch_add(1);
        return;
      }
      const uint64_t batches = (count + kBatchItems - 1) / kBatchItems;
      std::vector<HostTensor> tensors(
          kBatchItems, CompactTensor(kU8, {kTensorBytes}, std::vector<uint8_t>(kTensorBytes)));
      for (uint64_t batch = c; batch < batches; batch += kClients) {
        if (absl::Now() > deadline) {
          out_of_time.store(true);
          return;
        }
        std::vector<BatchPutItem> items;
        for (uint64_t index = batch * kBatchItems;
             index < std::min(count, (batch + 1) * kBatchItems); ++index) {
          HostTensor& tensor = tensors[items.size()];
          FillTensor(index, tensor.storage);
          items.push_back(BatchPutItem{.name = Name(index), .tensor = tensor.dl()});
        }
        absl::StatusOr<BatchPutResult> put = client->BatchPut(items);
        if (!put.ok()) {
          if (failures.fetch_add(1) < 5) ADD_FAILURE() << "batch " << batch << ": " << put.status();
          continue;
        }
        for (const absl::StatusOr<TensorInfo>& item : put->items) {
          if (item.ok()) {
            stored.fetch_add(1);
          } else if (failures.fetch_add(1) < 5) {
            ADD_FAILURE() << item.status();
          }
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  const absl::Duration put_time = absl::Now() - start;
  ASSERT_FALSE(out_of_time.load()) << "only " << stored.load() << " puts within " << kTimeLimit;
  ASSERT_EQ(failures.load(), 0u) << harness.StderrTails();
  ASSERT_EQ(stored.load(), count);
  const ProcessMemory holder_after = MemoryOf(harness.process(0).pid());
  const ProcessMemory other_after = MemoryOf(harness.process(1).pid());

  // A node that joins now: ready without reading the names, then lists
  // them all, a page (one bounded etcd range) at a time.
  const absl::Time join_start = absl::Now();
  ServerProcessOptions late;
  late.flags = harness.JoinFlags("node-d", etcd_->endpoint());
  late.log_level = "warning";
  absl::StatusOr<std::unique_ptr<ServerProcess>> joined = ServerProcess::Start(late);
  ASSERT_TRUE(joined.ok()) << joined.status();
  const absl::Duration join_time = absl::Now() - join_start;
  const ProcessMemory joined_before = MemoryOf((*joined)->pid());
  ClientOptions d_options = RemoteClientOptions();
  d_options.timeout = absl::Seconds(30);
  std::unique_ptr<Client> d = ConnectClient((*joined)->address(), d_options);
  ASSERT_NE(d, nullptr);
  const absl::Time list_start = absl::Now();
  uint64_t listed = 0;
  std::string token;
  do {
    absl::StatusOr<ListResult> page = d->ListCluster("scale/", 1000, token);
    ASSERT_TRUE(page.ok()) << page.status();
    listed += page->tensors.size();
    token = page->next_page_token;
  } while (!token.empty());
  const absl::Duration list_time = absl::Now() - list_start;
  EXPECT_EQ(listed, count);

  // Reads through the new node pull from the holder, byte-exact.
  std::vector<uint8_t> expected(kTensorBytes);
  uint64_t state = 7;
  for (int check = 0; check < 200; ++check) {
    const uint64_t index = check == 0 ? count - 1 : NextRandom(state) % count;
    FillTensor(index, expected);
    absl::StatusOr<Tensor> fetched = d->Fetch(Name(index));
    ASSERT_TRUE(fetched.ok()) << Name(index) << ": " << fetched.status();
    ASSERT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), expected))
        << Name(index);
  }
  const ProcessMemory joined_after = MemoryOf((*joined)->pid());

  // kill -9 of the holder: the others' watches and listings go on.
  ClientOptions c_options = RemoteClientOptions();
  c_options.timeout = absl::Seconds(30);
  std::unique_ptr<Client> c = ConnectClient(harness.address(2), c_options);
  WatchOptions watch_options;
  watch_options.cluster = true;
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = c->Watch("after/", watch_options);
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(harness.Stop(0, SIGKILL).ok());
  absl::SleepFor(absl::Seconds(3));  // the TTL (2 s) and a beat
  std::unique_ptr<Client> b = ConnectClient(harness.address(1), c_options);
  std::vector<uint8_t> small(kTensorBytes, 5);
  const HostTensor after = CompactTensor(kU8, {kTensorBytes}, small);
  ASSERT_TRUE(b->Put("after/kill", after.dl()).ok());
  absl::StatusOr<WatchEvent> event = (*watch)->Next(absl::Seconds(5));
  ASSERT_TRUE(event.ok()) << event.status() << harness.StderrTails();
  ASSERT_EQ(event->items.size(), 1u);
  EXPECT_EQ(event->items[0].name, "after/kill");
  absl::StatusOr<ListResult> page = c->ListCluster("scale/", 10);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->tensors.size(), 10u);
  // A name only the dead node held: unavailable (not missing, not old), at once.
  const absl::Time read_start = absl::Now();
  EXPECT_EQ(d->Fetch(Name(count / 2)).status().code(), absl::StatusCode::kUnavailable);
  const absl::Duration unavailable_time = absl::Now() - read_start;

  const uint64_t etcd_db_bytes =
      FileBytes(std::filesystem::path(etcd_->data_dir()) / "member" / "snap" / "db");
  std::printf(
      "cluster scale: %llu names of %lld bytes put on one node in %s (%.0f names/s, %d clients, "
      "batches of %zu); holder memory beyond the payload %.0f bytes per name (RssAnon %llu -> "
      "%llu KiB), a node holding none %.1f bytes per name (%llu -> %llu KiB); node d ready in %s, "
      "listed all %llu names in %s (%.0f names/s), its memory after listing and 200 pulls %.1f "
      "bytes per name (%llu -> %llu KiB); read of a killed holder's name answered UNAVAILABLE in "
      "%s; etcd db %.0f MiB\n",
      static_cast<unsigned long long>(count), static_cast<long long>(kTensorBytes),
      absl::FormatDuration(put_time).c_str(),
      static_cast<double>(count) / absl::ToDoubleSeconds(put_time), kClients, kBatchItems,
      KibPerName(holder_before, holder_after, count),
      static_cast<unsigned long long>(holder_before.anon_kib),
      static_cast<unsigned long long>(holder_after.anon_kib),
      KibPerName(other_before, other_after, count),
      static_cast<unsigned long long>(other_before.anon_kib),
      static_cast<unsigned long long>(other_after.anon_kib),
      absl::FormatDuration(join_time).c_str(), static_cast<unsigned long long>(listed),
      absl::FormatDuration(list_time).c_str(),
      static_cast<double>(listed) / absl::ToDoubleSeconds(list_time),
      KibPerName(joined_before, joined_after, count),
      static_cast<unsigned long long>(joined_before.anon_kib),
      static_cast<unsigned long long>(joined_after.anon_kib),
      absl::FormatDuration(unavailable_time).c_str(),
      static_cast<double>(etcd_db_bytes) / (1 << 20));
  // Nodes that hold none of the names keep nothing per name (no mirror of
  // the directory): well under 64 bytes each, whatever the allocator does.
  EXPECT_LT(KibPerName(other_before, other_after, count), 64.0);
  EXPECT_LT(KibPerName(joined_before, joined_after, count), 64.0);
  EXPECT_LT(join_time, absl::Seconds(10));
  EXPECT_LT(unavailable_time, absl::Seconds(5));
}

}  // namespace
}  // namespace tensord::testing
