// A bounded soak: 8 clients, each on its own connection (half over local
// handoff, half over gRPC), mixing put/fetch/stat/delete on 24 shared names
// for at most 10 s, under memory pressure that makes cache tensors evict.
// Every fetched tensor is checked against the seed its first 8 bytes carry;
// any mismatch fails. The figures are printed and recorded as properties.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/mutex.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

constexpr int kClients = 8;
constexpr int kNames = 24;
constexpr int kMaxOpsPerClient = 20'000;
constexpr absl::Duration kDuration = absl::Seconds(10);

// 8 bytes of seed, then PatternBytes(seed); the size derives from the seed
// too, so a fetch can check any version without knowing who put it.
size_t SizeForSeed(uint64_t seed) { return 8 + (seed % 64) * 4096 + seed % 4093; }

std::vector<uint8_t> EncodeSeeded(uint64_t seed) {
  std::vector<uint8_t> bytes = PatternBytes(SizeForSeed(seed), seed);
  std::memcpy(bytes.data(), &seed, 8);
  return bytes;
}

bool VerifySeeded(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 8) return false;
  uint64_t seed = 0;
  std::memcpy(&seed, bytes.data(), 8);
  return bytes == EncodeSeeded(seed);
}

struct Figures {
  std::atomic<uint64_t> puts{0}, fetches{0}, stats{0}, deletes{0};
  std::atomic<uint64_t> not_found{0}, resource_exhausted{0}, mismatches{0};
  Mutex mutex;
  std::map<std::string, uint64_t> unexpected;  // "op: status" -> count
  uint64_t ops() const { return puts + fetches + stats + deletes; }
};

// NOT_FOUND after a concurrent delete or eviction, and RESOURCE_EXHAUSTED
// from the deliberately small --max-host-bytes, are expected; anything else
// is an error.
void Count(Figures& figures, const char* op, const absl::Status& status) {
  if (status.ok()) return;
  if (status.code() == absl::StatusCode::kNotFound) {
    ++figures.not_found;
  } else if (status.code() == absl::StatusCode::kResourceExhausted) {
    ++figures.resource_exhausted;
  } else {
    MutexLock lock(&figures.mutex);
    ++figures.unexpected[absl::StrCat(op, ": ", status.ToString())];
  }
}

void RunClient(Client& client, int index, absl::Time deadline, Figures& figures) {
  uint64_t state = 0xC0FFEE + static_cast<uint64_t>(index);
  for (int op = 0; op < kMaxOpsPerClient && absl::Now() < deadline; ++op) {
    const uint64_t roll = NextRandom(state);
    const std::string name = absl::StrCat("soak/", roll % kNames);
    switch ((roll >> 8) % 20) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
      case 5:
      case 6: {  // put, 35%
        const uint64_t seed = NextRandom(state);
        std::vector<uint8_t> bytes = EncodeSeeded(seed);
        HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(bytes.size())}, bytes);
        PutOptions options;
        options.retention = seed % 2 == 0 ? Retention::kCache : Retention::kDefault;
        options.send_crc32c = seed % 3 == 0;
        Count(figures, "put", client.Put(name, tensor.dl(), options).status());
        ++figures.puts;
        break;
      }
      case 7:
      case 8:
      case 9:
      case 10:
      case 11:
      case 12:
      case 13:
      case 14: {  // fetch, 40%
        FetchOptions options;
        options.verify_crc32c = true;
        options.read_only = roll % 2 == 0;
        absl::StatusOr<Tensor> fetched = client.Fetch(name, options);
        Count(figures, "fetch", fetched.status());
        if (fetched.ok() && !VerifySeeded(TensorBytes(*fetched))) ++figures.mismatches;
        ++figures.fetches;
        break;
      }
      case 15:
      case 16:
      case 17: {  // stat, 15%
        Count(figures, "stat", client.Stat(name).status());
        ++figures.stats;
        break;
      }
      default: {  // delete, 10%
        Count(figures, "delete", client.Delete(name).status());
        ++figures.deletes;
        break;
      }
    }
  }
}

TEST(ConcurrencySoakTest, MixedClientsOnSharedNamesNeverSeeAWrongByte) {
  char pattern[] = "/tmp/tensord-soak-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string socket_path = std::string(pattern) + "/handoff.sock";
  ServerProcessOptions server_options;
  // 24 names of ~128 KiB on average in 3 MiB: puts evict cache tensors or
  // are refused. Info logs, to count the eviction rounds.
  server_options.flags = {"--max-host-bytes=3MiB", "--chunk-bytes=64KiB",
                          "--handoff-socket=" + socket_path};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status();

  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    ClientOptions options;  // own_connection: a TCP connection each
    if (i % 2 == 0) {
      options.path = TransferPath::kLocal;
      options.handoff_socket = socket_path;
    } else {
      options.path = TransferPath::kRemote;
    }
    clients.push_back(ConnectClient((*server)->address(), options));
    ASSERT_NE(clients.back(), nullptr);
  }
  Figures figures;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + kDuration;
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] { RunClient(*clients[i], i, deadline, figures); });
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  clients.clear();

  const std::string log = (*server)->Stderr();
  uint64_t eviction_rounds = 0;
  for (size_t at = log.find("event=evicted");
       at != std::string::npos && eviction_rounds < 1'000'000;
       at = log.find("event=evicted", at + 1)) {
    ++eviction_rounds;
  }
  uint64_t unexpected = 0;
  for (const auto& [what, count] : figures.unexpected) unexpected += count;
  const double ops_per_second = static_cast<double>(figures.ops()) / seconds;
  std::printf(
      "soak: %d clients, %.1f s, %lu ops (%.0f ops/s): %lu put, %lu fetch, %lu stat, %lu delete; "
      "expected NOT_FOUND %lu, RESOURCE_EXHAUSTED %lu; unexpected errors %lu; mismatches %lu; "
      "server eviction rounds %lu\n",
      kClients, seconds, figures.ops(), ops_per_second, figures.puts.load(), figures.fetches.load(),
      figures.stats.load(), figures.deletes.load(), figures.not_found.load(),
      figures.resource_exhausted.load(), unexpected, figures.mismatches.load(), eviction_rounds);
  ::testing::Test::RecordProperty("clients", kClients);
  ::testing::Test::RecordProperty("seconds", absl::StrCat(seconds));
  ::testing::Test::RecordProperty("ops", absl::StrCat(figures.ops()));
  ::testing::Test::RecordProperty("ops_per_second",
                                  absl::StrCat(static_cast<int64_t>(ops_per_second)));
  ::testing::Test::RecordProperty("unexpected_errors", absl::StrCat(unexpected));
  ::testing::Test::RecordProperty("mismatches", absl::StrCat(figures.mismatches.load()));
  ::testing::Test::RecordProperty("eviction_rounds", absl::StrCat(eviction_rounds));

  EXPECT_EQ(figures.mismatches.load(), 0u);
  for (const auto& [what, count] : figures.unexpected) ADD_FAILURE() << count << "x " << what;
  EXPECT_GT(figures.fetches.load(), 0u);
  EXPECT_TRUE((*server)->Alive()) << (*server)->StderrTail();
  absl::StatusOr<int> stopped = (*server)->Stop(SIGTERM);
  EXPECT_TRUE(stopped.ok() && WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0)
      << (*server)->StderrTail();
  std::filesystem::remove_all(pattern);
}

}  // namespace
}  // namespace tensord::testing
