// Operations surface of a real tensord: the Prometheus endpoint
// (--metrics-listen) scraped over HTTP, and request ids in metadata and logs.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/mutex.h"
#include "service/common/scoped_fd.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

constexpr absl::Duration kSettleTimeout = absl::Seconds(10);

// Prometheus text exposition: "name{labels}" -> value; comment lines skipped.
std::map<std::string, double> ParseExposition(const std::string& text) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      ADD_FAILURE() << "unparsable exposition line: " << line;
      continue;
    }
    samples[std::string(line.substr(0, space))] = value;
  }
  return samples;
}

// Stops `server` and expects exit code 0, so a crash or a sanitizer report
// at shutdown (the metrics endpoint stops then too) fails the test.
void ExpectCleanExit(ServerProcess* server) {
  if (server == nullptr) return;
  absl::StatusOr<int> status = server->Stop(SIGTERM, absl::Seconds(20));
  EXPECT_TRUE(status.ok() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << (status.ok() ? absl::StrCat("wait status ", *status) : status.status().ToString())
      << "; its stderr:\n"
      << server->StderrTail();
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tensord-metrics-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    socket_dir_ = pattern;
    ServerProcessOptions options;
    options.flags = {"--handoff-socket=" + socket_dir_ + "/handoff.sock",
                     "--max-host-bytes=64MiB",
                     "--metrics-listen=127.0.0.1:0",
                     "--device-backend=simulated",
                     "--simulated-devices=2",
                     "--max-device-bytes=1MiB"};
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    // Logged before the ready file is written, so it is there now.
    metrics_address_ = LogField(server_->Stderr(), "metrics_serving", "address");
    ASSERT_TRUE(absl::StartsWith(metrics_address_, "127.0.0.1:")) << server_->Stderr();
  }

  void TearDown() override {
    ExpectCleanExit(server_.get());
    server_.reset();
    ::rmdir(socket_dir_.c_str());
  }

  std::map<std::string, double> Scrape() {
    absl::StatusOr<std::string> body = HttpGet(metrics_address_, "/metrics");
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? ParseExposition(*body) : std::map<std::string, double>{};
  }

  // Scrapes until `series` has `expected` (calls are counted when gRPC is
  // done with them, which may be just after the client saw the answer).
  ::testing::AssertionResult ScrapeUntil(const std::string& series, double expected) {
    const absl::Time deadline = absl::Now() + kSettleTimeout;
    std::optional<double> last;
    do {
      std::map<std::string, double> samples = Scrape();
      if (auto it = samples.find(series); it != samples.end()) {
        last = it->second;
        if (*last == expected) return ::testing::AssertionSuccess();
      }
      absl::SleepFor(absl::Milliseconds(20));
    } while (absl::Now() < deadline);
    return ::testing::AssertionFailure()
           << series << " is " << (last ? absl::StrCat(*last) : "absent") << ", expected "
           << expected;
  }

  std::string socket_dir_;
  std::unique_ptr<ServerProcess> server_;
  std::string metrics_address_;
};

TEST_F(MetricsEndpointTest, ScrapeReflectsRegistryCallsBytesAndHandoff) {
  std::map<std::string, double> initial = Scrape();
  EXPECT_EQ(initial["tensord_tensors{device=\"cpu\"}"], 0);
  EXPECT_EQ(initial["tensord_capacity_limit_bytes{device=\"cpu\"}"], 64 << 20);
  EXPECT_EQ(initial["tensord_rpc_requests_total{rpc=\"Put\",code=\"OK\"}"], 0);
  EXPECT_EQ(initial.count("tensord_evictions_total{device=\"cpu\"}"), 1u);
  EXPECT_EQ(initial["tensord_evictions_total{device=\"cpu\"}"], 0);
  EXPECT_EQ(initial["tensord_handoff_connections"], 0);

  std::unique_ptr<Client> remote = ConnectClient(server_->address(), RemoteClientOptions());
  ASSERT_NE(remote, nullptr);
  HostTensor big = CompactTensor(kU8, {40000}, PatternBytes(40000, 1));
  HostTensor small = CompactTensor(kU8, {1000}, PatternBytes(1000, 2));
  ASSERT_TRUE(remote->Put("metrics/big", big.dl()).ok());
  ASSERT_TRUE(remote->Put("metrics/small", small.dl()).ok());
  ASSERT_TRUE(remote->Fetch("metrics/big").ok());
  EXPECT_EQ(remote->Stat("metrics/missing").status().code(), absl::StatusCode::kNotFound);

  EXPECT_TRUE(ScrapeUntil("tensord_rpc_requests_total{rpc=\"Put\",code=\"OK\"}", 2));
  EXPECT_TRUE(ScrapeUntil("tensord_rpc_requests_total{rpc=\"Fetch\",code=\"OK\"}", 1));
  std::map<std::string, double> after = Scrape();
  EXPECT_EQ(after["tensord_tensors{device=\"cpu\"}"], 2);
  EXPECT_EQ(after["tensord_versions{device=\"cpu\"}"], 2);
  EXPECT_EQ(after["tensord_stored_bytes{device=\"cpu\"}"], 41000);
  EXPECT_EQ(after["tensord_capacity_used_bytes{device=\"cpu\"}"], 41000);
  EXPECT_EQ(after["tensord_rpc_requests_total{rpc=\"Stat\",code=\"NOT_FOUND\"}"], 1);
  EXPECT_EQ(after["tensord_rpc_errors_total{rpc=\"Stat\"}"], 1);
  EXPECT_EQ(after["tensord_rpc_errors_total{rpc=\"Put\"}"], 0);
  EXPECT_EQ(after["tensord_remote_bytes_total{direction=\"received\"}"], 41000);
  EXPECT_EQ(after["tensord_remote_bytes_total{direction=\"sent\"}"], 40000);
  EXPECT_EQ(after["tensord_rpc_duration_seconds_count{rpc=\"Put\"}"], 2);
  EXPECT_EQ(after["tensord_rpc_duration_seconds_bucket{rpc=\"Put\",le=\"+Inf\"}"], 2);
  EXPECT_GT(after["tensord_rpc_duration_seconds_sum{rpc=\"Put\"}"], 0);
  // Both are small: slots of 40 KiB and 4 KiB, in one arena per size class.
  EXPECT_EQ(after["tensord_arena_slots_used"], 2);
  EXPECT_EQ(after["tensord_arenas"], 2);
  EXPECT_EQ(after["tensord_arena_bytes{state=\"used\"}"], 40960 + 4096);
  // Each arena is 16 MiB rounded up to whole slots.
  const double arena_bytes =
      after["tensord_arena_bytes{state=\"used\"}"] + after["tensord_arena_bytes{state=\"free\"}"];
  EXPECT_GE(arena_bytes, 2 * (16 << 20));
  EXPECT_LT(arena_bytes, 2 * (16 << 20) + 40960);
  // The fetch's lease lasts until gRPC released the last chunk it sent.
  EXPECT_TRUE(ScrapeUntil("tensord_open_leases{device=\"cpu\"}", 0));

  // A local reader holds a lease through the handoff socket while its
  // tensor lives; the bytes were handed over, not sent.
  ClientOptions local_options;
  local_options.path = TransferPath::kLocal;
  std::unique_ptr<Client> local = ConnectClient(server_->address(), local_options);
  ASSERT_NE(local, nullptr);
  {
    absl::StatusOr<Tensor> mapped = local->Fetch("metrics/big");
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    EXPECT_TRUE(ScrapeUntil("tensord_handoff_leases", 1));
    EXPECT_TRUE(ScrapeUntil("tensord_open_leases{device=\"cpu\"}", 1));
    std::map<std::string, double> holding = Scrape();
    EXPECT_EQ(holding["tensord_handoff_connections"], 1);
    EXPECT_EQ(holding["tensord_handoff_bytes_total{direction=\"sent\"}"], 40000);
    EXPECT_EQ(holding["tensord_remote_bytes_total{direction=\"sent\"}"], 40000);
  }
  EXPECT_TRUE(ScrapeUntil("tensord_handoff_leases", 0));
  EXPECT_TRUE(ScrapeUntil("tensord_open_leases{device=\"cpu\"}", 0));
  local.reset();
  EXPECT_TRUE(ScrapeUntil("tensord_handoff_connections", 0));
}

// Puts of one size write into the memfd of a version that is gone, never
// into one a reader still holds (--spare-put-bytes, on by default).
TEST_F(MetricsEndpointTest, RepeatedPutsOfOneSizeReuseGoneVersionsMemfdsOnly) {
  constexpr size_t kBytes = 4 << 20;
  std::unique_ptr<Client> remote = ConnectClient(server_->address(), RemoteClientOptions());
  ASSERT_NE(remote, nullptr);
  ClientOptions local_options;
  local_options.path = TransferPath::kLocal;
  std::unique_ptr<Client> local = ConnectClient(server_->address(), local_options);
  ASSERT_NE(local, nullptr);
  // Waits for the fetch's lease to end (gRPC releases it a moment after the
  // last chunk), so the version it read can go as soon as it is replaced.
  auto put_and_check = [&](uint64_t seed, int leases_held_elsewhere = 0) {
    const std::vector<uint8_t> bytes = PatternBytes(kBytes, seed);
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(kBytes)}, bytes);
    ASSERT_TRUE(remote->Put("spare/w", tensor.dl()).ok());
    absl::StatusOr<Tensor> fetched = remote->Fetch("spare/w");
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    EXPECT_EQ(std::memcmp(fetched->dl_tensor().data, bytes.data(), kBytes), 0) << seed;
    EXPECT_TRUE(ScrapeUntil("tensord_open_leases{device=\"cpu\"}", leases_held_elsewhere));
  };
  put_and_check(1);
  put_and_check(2);  // version 1 is kept
  EXPECT_TRUE(ScrapeUntil("tensord_spare_put_buffers", 1));
  put_and_check(3);  // into version 1's memfd; version 2 is kept
  put_and_check(4);
  EXPECT_TRUE(ScrapeUntil("tensord_spare_put_buffer_reuses_total", 2));
  std::map<std::string, double> kept = Scrape();
  EXPECT_EQ(kept["tensord_spare_put_buffer_bytes"], kBytes);
  // The spare holds room in --max-host-bytes but is not a tensor's.
  EXPECT_EQ(kept["tensord_capacity_used_bytes{device=\"cpu\"}"], kBytes);

  // A local reader maps version 4; two more puts must not write into it.
  absl::StatusOr<Tensor> mapped = local->Fetch("spare/w");
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  put_and_check(5, 1);
  put_and_check(6, 1);
  EXPECT_EQ(std::memcmp(mapped->dl_tensor().data, PatternBytes(kBytes, 4).data(), kBytes), 0);
  EXPECT_EQ(Scrape()["tensord_spare_put_buffer_reuses_total"], 3);  // 5 took 3's; 6 a new one
  *mapped = Tensor();
  EXPECT_TRUE(ScrapeUntil("tensord_spare_put_buffers", 2));  // 4's and 5's
  put_and_check(7);
  EXPECT_TRUE(ScrapeUntil("tensord_spare_put_buffer_reuses_total", 4));
}

// Runs under TSan in CI (the name matches 'Concurren'): scrapes read the
// registry and the counters while remote and local clients use them.
TEST_F(MetricsEndpointTest, ConcurrentScrapesWhileClientsPutFetchAndMap) {
  constexpr int kRounds = 15;
  constexpr int64_t kBytes = 4096;
  std::unique_ptr<Client> seed = ConnectClient(server_->address(), RemoteClientOptions());
  ASSERT_NE(seed, nullptr);
  HostTensor shared = CompactTensor(kU8, {kBytes}, PatternBytes(kBytes, 9));
  ASSERT_TRUE(seed->Put("metrics/shared", shared.dl()).ok());

  std::atomic<int> failures{0};
  Mutex first_failure_mu;
  std::string first_failure;
  auto note_failure = [&](const absl::Status& status) {
    failures++;
    MutexLock lock(&first_failure_mu);
    if (first_failure.empty()) first_failure = status.ToString();
  };
  std::vector<std::thread> workers;
  for (int worker = 0; worker < 2; ++worker) {
    workers.emplace_back([&, worker] {
      std::unique_ptr<Client> client = ConnectClient(server_->address(), RemoteClientOptions());
      if (client == nullptr) {
        failures++;
        return;
      }
      // The counts below are about calls, not about connecting: a first
      // connection refused on a loaded host (calls then fail fast while
      // gRPC backs off) is waited out here, bounded.
      WaitUntil([&] { return client->Health().ok(); }, absl::Seconds(20));
      HostTensor tensor = CompactTensor(kU8, {kBytes}, PatternBytes(kBytes, worker));
      const std::string name = absl::StrCat("metrics/worker", worker);
      for (int round = 0; round < kRounds; ++round) {
        absl::Status status = client->Put(name, tensor.dl()).status();
        if (status.ok()) status = client->Fetch(name).status();
        if (!status.ok()) note_failure(status);
      }
    });
  }
  workers.emplace_back([&] {
    ClientOptions options;
    options.path = TransferPath::kLocal;
    std::unique_ptr<Client> client = ConnectClient(server_->address(), options);
    if (client == nullptr) {
      failures++;
      return;
    }
    // As the remote workers: connected (bounded) before the counted calls.
    WaitUntil([&] { return client->Health().ok(); }, absl::Seconds(20));
    for (int round = 0; round < kRounds; ++round) {
      absl::Status status = client->Fetch("metrics/shared").status();
      if (!status.ok()) note_failure(status);
    }
  });
  double last_puts = 0;
  for (int scrape = 0; scrape < 20; ++scrape) {
    std::map<std::string, double> samples = Scrape();
    const double puts = samples["tensord_rpc_requests_total{rpc=\"Put\",code=\"OK\"}"];
    EXPECT_GE(puts, last_puts) << "a counter went backwards";
    last_puts = puts;
  }
  for (std::thread& worker : workers) worker.join();
  EXPECT_EQ(failures.load(), 0) << "first: " << first_failure;
  EXPECT_TRUE(ScrapeUntil("tensord_rpc_requests_total{rpc=\"Put\",code=\"OK\"}", 1 + 2 * kRounds));
  // Tensors this small come back from one FetchInline call each.
  EXPECT_TRUE(
      ScrapeUntil("tensord_rpc_requests_total{rpc=\"FetchInline\",code=\"OK\"}", 2 * kRounds));
  EXPECT_TRUE(ScrapeUntil("tensord_remote_bytes_total{direction=\"received\"}",
                          (1 + 2 * kRounds) * kBytes));
  EXPECT_TRUE(ScrapeUntil("tensord_open_leases{device=\"cpu\"}", 0));
  std::map<std::string, double> final_samples = Scrape();
  EXPECT_EQ(final_samples["tensord_tensors{device=\"cpu\"}"], 3);
  EXPECT_GE(final_samples["tensord_handoff_bytes_total{direction=\"sent\"}"], kBytes);
}

TEST_F(MetricsEndpointTest, EvictedSmallCacheTensorsFreeTheirArenaSlots) {
  std::unique_ptr<Client> remote = ConnectClient(server_->address(), RemoteClientOptions());
  ASSERT_NE(remote, nullptr);
  // 64 MiB capacity: 200 cache tensors of 512 KiB need 100 MiB, so the
  // oldest are evicted, and their slots go back to the arenas.
  constexpr int64_t kBytes = 512 << 10;
  HostTensor tensor = CompactTensor(kU8, {kBytes}, PatternBytes(kBytes, 4));
  PutOptions cache;
  cache.retention = Retention::kCache;
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(remote->Put(absl::StrCat("kv/", i), tensor.dl(), cache).ok()) << i;
  }
  EXPECT_TRUE(remote->Fetch("kv/199").ok());
  EXPECT_TRUE(ScrapeUntil("tensord_open_leases{device=\"cpu\"}", 0));
  std::map<std::string, double> samples = Scrape();
  const double held = samples["tensord_tensors{device=\"cpu\"}"];
  EXPECT_GT(samples["tensord_evictions_total{device=\"cpu\"}"], 0);
  EXPECT_LE(held * kBytes, 64 << 20);
  EXPECT_EQ(samples["tensord_arena_slots_used"], held);
  EXPECT_EQ(samples["tensord_arena_bytes{state=\"used\"}"], held * kBytes);
}

TEST_F(MetricsEndpointTest, EvictionsOfCacheTensorsAreCounted) {
  // 64 MiB capacity, high watermark 0.9: the third 24 MiB cache tensor
  // evicts the least recently used one.
  std::unique_ptr<Client> remote = ConnectClient(server_->address(), RemoteClientOptions());
  ASSERT_NE(remote, nullptr);
  constexpr uint64_t kBytes = uint64_t{24} << 20;
  HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(kBytes)}, PatternBytes(kBytes, 3));
  PutOptions cache;
  cache.retention = Retention::kCache;
  for (const char* name : {"evict/a", "evict/b", "evict/c"}) {
    ASSERT_TRUE(remote->Put(name, tensor.dl(), cache).ok()) << name;
  }
  EXPECT_EQ(remote->Stat("evict/a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(ScrapeUntil("tensord_evictions_total{device=\"cpu\"}", 1));
  EXPECT_TRUE(ScrapeUntil("tensord_evicted_bytes_total{device=\"cpu\"}", kBytes));
}

TEST_F(MetricsEndpointTest, DeviceTensorsAreCountedUnderTheirDevice) {
  std::unique_ptr<Client> remote = ConnectClient(server_->address(), RemoteClientOptions());
  ASSERT_NE(remote, nullptr);
  HostTensor tensor = CompactTensor(kU8, {1000}, PatternBytes(1000, 4));
  PutOptions on_cuda1;
  on_cuda1.device = DLDevice{kDLCUDA, 1};
  ASSERT_TRUE(remote->Put("gpu/a", tensor.dl(), on_cuda1).ok());
  std::map<std::string, double> samples = Scrape();
  EXPECT_EQ(samples["tensord_tensors{device=\"cuda:1\"}"], 1);
  EXPECT_EQ(samples["tensord_stored_bytes{device=\"cuda:1\"}"], 1000);
  EXPECT_EQ(samples["tensord_capacity_used_bytes{device=\"cuda:1\"}"], 1000);
  EXPECT_EQ(samples["tensord_capacity_limit_bytes{device=\"cuda:0\"}"], 1 << 20);
  EXPECT_EQ(samples["tensord_stored_bytes{device=\"cuda:0\"}"], 0);
  EXPECT_EQ(samples["tensord_tensors{device=\"cpu\"}"], 0);
  EXPECT_EQ(samples["tensord_capacity_used_bytes{device=\"cpu\"}"], 0);
}

TEST_F(MetricsEndpointTest, BatchItemsAreCountedOneByOne) {
  std::unique_ptr<Client> remote = ConnectClient(server_->address(), RemoteClientOptions());
  ASSERT_NE(remote, nullptr);
  HostTensor a = CompactTensor(kU8, {100}, PatternBytes(100, 1));
  HostTensor b = CompactTensor(kU8, {200}, PatternBytes(200, 2));
  const std::vector<BatchPutItem> items = {{"batch/a", a.dl()}, {"batch/b", b.dl()}};
  ASSERT_TRUE(remote->BatchPut(items).ok());
  // One name twice cannot be one atomic group: both items fail.
  const std::vector<BatchPutItem> twice = {{"batch/a", a.dl()}, {"batch/a", b.dl()}};
  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> refused = remote->BatchPut(twice, atomic);
  ASSERT_TRUE(refused.ok()) << refused.status();
  const std::vector<TensorRef> wanted = {{"batch/a", 0}, {"batch/missing", 0}, {"batch/b", 0}};
  ASSERT_TRUE(remote->BatchFetch(wanted).ok());

  EXPECT_TRUE(ScrapeUntil("tensord_rpc_requests_total{rpc=\"BatchFetch\",code=\"OK\"}", 1));
  EXPECT_TRUE(ScrapeUntil("tensord_rpc_requests_total{rpc=\"BatchPut\",code=\"OK\"}", 2));
  std::map<std::string, double> after = Scrape();
  EXPECT_EQ(after["tensord_batch_items_total{rpc=\"BatchPut\",result=\"ok\"}"], 2);
  EXPECT_EQ(after["tensord_batch_items_total{rpc=\"BatchPut\",result=\"failed\"}"], 2);
  EXPECT_EQ(after["tensord_batch_items_total{rpc=\"BatchFetch\",result=\"ok\"}"], 2);
  EXPECT_EQ(after["tensord_batch_items_total{rpc=\"BatchFetch\",result=\"failed\"}"], 1);
  EXPECT_EQ(after["tensord_remote_bytes_total{direction=\"sent\"}"], 300);
  EXPECT_EQ(after["tensord_tensors{device=\"cpu\"}"], 2);
}

TEST_F(MetricsEndpointTest, UnknownPathIsNotFoundAndMetricsStillServe) {
  absl::StatusOr<std::string> missing = HttpGet(metrics_address_, "/nothing-here");
  EXPECT_FALSE(missing.ok());
  EXPECT_FALSE(Scrape().empty());
}

TEST(MetricsFlagTest, MalformedAddressStopsTheServerWithAMessage) {
  ServerProcessOptions options;
  options.flags = {"--metrics-listen=no-port-here"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::StrContains(server.status().message(), "event=metrics_failed"))
      << server.status();
  EXPECT_TRUE(absl::StrContains(server.status().message(), "no-port-here")) << server.status();
}

// Request ids: the client's when sane, generated otherwise; returned in the
// initial metadata and carried by the call's log lines (at debug level every
// call logs, so every call gets one back).
class RequestIdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerProcessOptions options;
    options.log_level = "debug";
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = NewRawStub(server_->address());
  }

  void TearDown() override { ExpectCleanExit(server_.get()); }

  // Stats a missing tensor, sending `offered` as x-request-id unless empty;
  // returns the id the server answered with.
  std::string StatMissing(const std::string& offered) {
    std::unique_ptr<grpc::ClientContext> context = RawContext();
    if (!offered.empty()) context->AddMetadata("x-request-id", offered);
    v1::StatRequest request;
    request.set_name("request-id/missing");
    v1::StatResponse response;
    grpc::Status status = stub_->Stat(context.get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    const auto& metadata = context->GetServerInitialMetadata();
    auto it = metadata.find("x-request-id");
    if (it == metadata.end()) {
      ADD_FAILURE() << "no x-request-id in the initial metadata";
      return "";
    }
    return std::string(it->second.data(), it->second.size());
  }

  // True once the server log has an `event` line with request_id=`id`.
  bool LogHas(absl::string_view event, const std::string& id) {
    const absl::Time deadline = absl::Now() + kSettleTimeout;
    do {
      for (absl::string_view line : absl::StrSplit(server_->Stderr(), '\n')) {
        if (absl::StrContains(line, absl::StrCat(" event=", event, " ")) &&
            absl::StrContains(line, absl::StrCat(" request_id=", id))) {
          return true;
        }
      }
      absl::SleepFor(absl::Milliseconds(10));
    } while (absl::Now() < deadline);
    return false;
  }

  static bool LooksGenerated(const std::string& id) {
    return id.size() == 16 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<RawStub> stub_;
};

TEST_F(RequestIdTest, ClientIdIsEchoedAndLogged) {
  EXPECT_EQ(StatMissing("it-req-42:a/b"), "it-req-42:a/b");
  EXPECT_TRUE(LogHas("rpc", "it-req-42:a/b")) << server_->StderrTail();
}

TEST_F(RequestIdTest, MissingOrUnsafeIdsAreReplacedByGeneratedOnes) {
  const std::string none = StatMissing("");
  EXPECT_TRUE(LooksGenerated(none)) << none;
  EXPECT_TRUE(LogHas("rpc", none)) << server_->StderrTail();
  const std::string spaced = StatMissing("has space=forged");
  EXPECT_TRUE(LooksGenerated(spaced)) << spaced;
  const std::string long_id = StatMissing(std::string(129, 'a'));
  EXPECT_TRUE(LooksGenerated(long_id)) << long_id;
  EXPECT_NE(none, spaced);
  EXPECT_FALSE(absl::StrContains(server_->Stderr(), "forged"));
}

TEST_F(RequestIdTest, ClientOptionTagsPutAndDeleteLogLines) {
  ClientOptions options = RemoteClientOptions();
  options.request_id = "trainer-7";
  std::unique_ptr<Client> client = ConnectClient(server_->address(), options);
  ASSERT_NE(client, nullptr);
  HostTensor tensor = CompactTensor(kU8, {64}, PatternBytes(64, 3));
  ASSERT_TRUE(client->Put("request-id/put", tensor.dl()).ok());
  ASSERT_TRUE(client->Delete("request-id/put").ok());
  EXPECT_TRUE(LogHas("put", "trainer-7")) << server_->StderrTail();
  EXPECT_TRUE(LogHas("delete", "trainer-7")) << server_->StderrTail();
  EXPECT_TRUE(LogHas("rpc", "trainer-7")) << server_->StderrTail();
}

// A call's own request id replaces the client's, for that call only.
TEST_F(RequestIdTest, ACallsOwnIdReplacesTheClientsForThatCall) {
  ClientOptions options = RemoteClientOptions();
  options.request_id = "trainer-7";
  std::unique_ptr<Client> client = ConnectClient(server_->address(), options);
  ASSERT_NE(client, nullptr);
  HostTensor tensor = CompactTensor(kU8, {64}, PatternBytes(64, 3));
  ASSERT_TRUE(client->Put("request-id/call", tensor.dl(), {}, {.request_id = "step-1812"}).ok());
  ASSERT_TRUE(client->Delete("request-id/call").ok());
  EXPECT_TRUE(LogHas("put", "step-1812")) << server_->StderrTail();
  EXPECT_TRUE(LogHas("delete", "trainer-7")) << server_->StderrTail();
  const absl::StatusOr<TensorInfo> refused =
      client->Stat("request-id/call", 0, {.request_id = "has space"});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "CallOptions::request_id 'has space'"))
      << refused.status();
}

// At the default log level a successful unary call logs nothing, so an id
// the server would make up goes nowhere: none is made or sent. A failure,
// and a client's own id, still come back.
TEST(RequestIdEchoTest, AServerMadeIdComesBackOnlyWhenSomethingCarriesIt) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(ServerProcessOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<RawStub> stub = NewRawStub((*server)->address());
  ASSERT_TRUE(RawPutBytes(*stub, "request-id/held", "abcd").ok());
  auto stat = [&](const std::string& name, const std::string& offered, grpc::StatusCode expected) {
    std::unique_ptr<grpc::ClientContext> context = RawContext();
    if (!offered.empty()) context->AddMetadata("x-request-id", offered);
    v1::StatRequest request;
    request.set_name(name);
    v1::StatResponse response;
    EXPECT_EQ(stub->Stat(context.get(), request, &response).error_code(), expected) << name;
    const auto& metadata = context->GetServerInitialMetadata();
    auto it = metadata.find("x-request-id");
    return it == metadata.end() ? std::string("(none)")
                                : std::string(it->second.data(), it->second.size());
  };
  EXPECT_EQ(stat("request-id/held", "", grpc::StatusCode::OK), "(none)");
  EXPECT_EQ(stat("request-id/held", "mine-1", grpc::StatusCode::OK), "mine-1");
  const std::string failed = stat("request-id/missing", "", grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(failed.size(), 16u) << failed;
  // A stream's id leaves with its first message, whatever happens later.
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  v1::FetchRequest request;
  request.set_name("request-id/held");
  std::unique_ptr<grpc::ClientReader<v1::FetchResponse>> reader =
      stub->Fetch(context.get(), request);
  v1::FetchResponse response;
  while (reader->Read(&response)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(context->GetServerInitialMetadata().count("x-request-id"), 1u);
  ExpectCleanExit(server->get());
}

TEST_F(RequestIdTest, ClientRefusesAnIdTheServerWouldDrop) {
  ClientOptions options = RemoteClientOptions();
  options.server = server_->address();
  options.request_id = "line\nbreak";
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  EXPECT_TRUE(StatusIs(client.status(), absl::StatusCode::kInvalidArgument, "request_id"));
}

}  // namespace
}  // namespace tensord::testing
