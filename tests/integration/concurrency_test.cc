// Many client threads putting, fetching and deleting the same and distinct
// names at once. Every put encodes its writer and iteration in its bytes, so
// each fetch can check that it got exactly the bytes of one whole version,
// and that the version number it was told belongs to those bytes.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/mutex.h"
#include "tests/integration/client_test_support.h"

namespace tensord::testing {
namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 50;
constexpr int kSharedNames = 3;
constexpr absl::Duration kTimeLimit = absl::Seconds(90);

class ConcurrencyTest : public ClientServerTest<ConcurrencyTest> {
 public:
  // Small fetch chunks, so versions of a few hundred KiB span many messages.
  static std::vector<std::string> ServerFlags() { return {"--chunk-bytes=64KiB"}; }
};

uint32_t Mix(uint32_t writer, uint32_t iteration, uint32_t index) {
  uint64_t x = (uint64_t{writer} << 48) ^ (uint64_t{iteration} << 32) ^ index;
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// uint32 words: writer, iteration, word count, then Mix(writer, iteration, i).
// Sizes vary from 1 KiB to ~256 KiB so some versions span many chunks.
std::vector<uint8_t> EncodeVersion(uint32_t writer, uint32_t iteration) {
  const uint32_t words = 256 + ((writer * 131 + iteration * 17) % 64) * 1024;
  std::vector<uint32_t> data(words);
  data[0] = writer;
  data[1] = iteration;
  data[2] = words;
  for (uint32_t i = 3; i < words; ++i) data[i] = Mix(writer, iteration, i);
  std::vector<uint8_t> bytes(words * sizeof(uint32_t));
  std::memcpy(bytes.data(), data.data(), bytes.size());
  return bytes;
}

// Checks that `bytes` are exactly one EncodeVersion(); sets writer/iteration.
::testing::AssertionResult DecodeVersion(const std::vector<uint8_t>& bytes, uint32_t* writer,
                                         uint32_t* iteration) {
  if (bytes.size() < 12 || bytes.size() % 4 != 0) {
    return ::testing::AssertionFailure() << "fetched " << bytes.size() << " bytes";
  }
  uint32_t header[3];
  std::memcpy(header, bytes.data(), sizeof(header));
  *writer = header[0];
  *iteration = header[1];
  if (*writer >= kThreads || *iteration >= kIterations) {
    return ::testing::AssertionFailure()
           << "bytes claim writer " << *writer << " iteration " << *iteration;
  }
  const std::vector<uint8_t> expected = EncodeVersion(*writer, *iteration);
  return BytesEqual(bytes.data(), bytes.size(), expected)
         << " (the bytes of writer " << *writer << " iteration " << *iteration << ")";
}

HostTensor VersionTensor(uint32_t writer, uint32_t iteration) {
  std::vector<uint8_t> bytes = EncodeVersion(writer, iteration);
  const int64_t words = static_cast<int64_t>(bytes.size() / 4);
  return CompactTensor(kU32, {words}, std::move(bytes));
}

// Who put a version, as the put's reply said; or what a fetch decoded.
struct VersionRecord {
  std::string name;
  uint32_t writer = 0;
  uint32_t iteration = 0;
  friend bool operator==(const VersionRecord& a, const VersionRecord& b) {
    return std::tie(a.name, a.writer, a.iteration) == std::tie(b.name, b.writer, b.iteration);
  }
};

TEST_P(ConcurrencyTest, PutFetchStatFromManyThreads) {
  const std::string prefix = TestTensorName("");
  std::vector<std::string> shared_names;
  for (int k = 0; k < kSharedNames; ++k) shared_names.push_back(absl::StrCat(prefix, "shared", k));

  Mutex mutex;
  std::map<uint64_t, VersionRecord> puts;                   // version -> who put it
  std::vector<std::pair<uint64_t, VersionRecord>> fetches;  // what readers saw
  std::atomic<int> failures{0};
  std::atomic<int> completed_iterations{0};
  const absl::Time deadline = absl::Now() + kTimeLimit;

  // Half the threads share one client (it is documented thread-safe).
  std::unique_ptr<Client> shared_client = ConnectClient(server().address(), RemoteClientOptions());
  ASSERT_NE(shared_client, nullptr);

  auto record_put = [&](uint64_t version, VersionRecord record) {
    MutexLock lock(&mutex);
    const bool fresh = puts.emplace(version, record).second;
    if (!fresh) {
      ADD_FAILURE() << "version " << version << " was returned by two puts";
      failures++;
    }
  };

  auto worker = [&](uint32_t writer) {
    std::unique_ptr<Client> own_client;
    Client* client = shared_client.get();
    if (writer % 2 == 1) {
      own_client = ConnectClient(server().address(), RemoteClientOptions());
      if (own_client == nullptr) {
        failures++;
        return;
      }
      client = own_client.get();
    }
    const std::string private_name = absl::StrCat(prefix, "private", writer);
    std::map<std::string, uint64_t> last_seen;  // per name, for monotonic reads
    auto fail = [&](const std::string& what) {
      ADD_FAILURE() << "writer " << writer << ": " << what;
      failures++;
    };

    for (uint32_t iteration = 0; iteration < kIterations; ++iteration) {
      if (failures.load() > 0 || absl::Now() > deadline) return;

      // A name only this thread writes: a fetch must give back this put.
      HostTensor mine = VersionTensor(writer, iteration);
      absl::StatusOr<TensorInfo> put = client->Put(private_name, mine.dl());
      if (!put.ok()) return fail(absl::StrCat("put ", private_name, ": ", put.status().ToString()));
      record_put(put->version, {private_name, writer, iteration});
      absl::StatusOr<Tensor> fetched = client->Fetch(private_name);
      if (!fetched.ok()) return fail(absl::StrCat("fetch: ", fetched.status().ToString()));
      if (fetched->info().version != put->version) {
        return fail(absl::StrCat("fetched version ", fetched->info().version, " of ", private_name,
                                 " after putting ", put->version));
      }
      uint32_t w = 0, i = 0;
      ::testing::AssertionResult decoded = DecodeVersion(TensorBytes(*fetched), &w, &i);
      if (!decoded || w != writer || i != iteration) {
        return fail(absl::StrCat("private fetch: ", decoded.message()));
      }

      // A name every thread writes: a fetch gives some whole version, never
      // older than one this thread put or saw before.
      const std::string& shared = shared_names[(writer + iteration) % kSharedNames];
      HostTensor ours = VersionTensor(writer, iteration);
      put = client->Put(shared, ours.dl());
      if (!put.ok()) return fail(absl::StrCat("put ", shared, ": ", put.status().ToString()));
      record_put(put->version, {shared, writer, iteration});
      uint64_t& seen = last_seen[shared];
      seen = std::max(seen, put->version);

      fetched = client->Fetch(shared);
      if (!fetched.ok())
        return fail(absl::StrCat("fetch ", shared, ": ", fetched.status().ToString()));
      if (fetched->info().version < seen) {
        return fail(absl::StrCat("fetch of ", shared, " went back to version ",
                                 fetched->info().version, " after ", seen));
      }
      seen = fetched->info().version;
      decoded = DecodeVersion(TensorBytes(*fetched), &w, &i);
      if (!decoded) return fail(absl::StrCat("shared fetch: ", decoded.message()));
      if (fetched->info().shape !=
          std::vector<int64_t>{static_cast<int64_t>(fetched->data_bytes() / 4)}) {
        return fail("fetched shape does not match the fetched bytes");
      }
      {
        MutexLock lock(&mutex);
        fetches.emplace_back(fetched->info().version, VersionRecord{shared, w, i});
      }

      absl::StatusOr<TensorInfo> stat = client->Stat(shared);
      if (!stat.ok()) return fail(absl::StrCat("stat: ", stat.status().ToString()));
      if (stat->version < seen) {
        return fail(absl::StrCat("stat of ", shared, " went back to version ", stat->version,
                                 " after ", seen));
      }
      seen = stat->version;

      if (iteration % 10 == 0) {
        absl::StatusOr<ListResult> listed = client->List(prefix, 4);
        if (!listed.ok()) return fail(absl::StrCat("list: ", listed.status().ToString()));
        if (listed->tensors.empty()) return fail("list found none of the tensors");
      }
      completed_iterations++;
    }
  };

  std::vector<std::thread> threads;
  for (uint32_t writer = 0; writer < kThreads; ++writer) threads.emplace_back(worker, writer);
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(completed_iterations.load(), kThreads * kIterations)
      << "threads stopped early (time limit " << absl::FormatDuration(kTimeLimit) << ")";
  // Every version a reader got is one some put published, with its bytes.
  for (const auto& [version, seen] : fetches) {
    auto it = puts.find(version);
    ASSERT_NE(it, puts.end()) << "fetched version " << version << " no put returned";
    EXPECT_EQ(it->second, seen) << "version " << version << " of " << seen.name << " holds writer "
                                << seen.writer << " iteration " << seen.iteration
                                << " but was put by writer " << it->second.writer << " iteration "
                                << it->second.iteration << " as " << it->second.name;
  }
}

TEST_P(ConcurrencyTest, DeletesRaceWithPutsAndFetches) {
  const std::string name = TestTensorName("contended");
  constexpr int kRacers = 4;
  constexpr int kRounds = 30;
  std::atomic<int> failures{0};
  const absl::Time deadline = absl::Now() + kTimeLimit;

  auto racer = [&](uint32_t writer) {
    std::unique_ptr<Client> client = ConnectClient(server().address(), RemoteClientOptions());
    if (client == nullptr) {
      failures++;
      return;
    }
    for (uint32_t round = 0; round < kRounds && failures.load() == 0 && absl::Now() < deadline;
         ++round) {
      HostTensor tensor = VersionTensor(writer, round);
      absl::Status put = client->Put(name, tensor.dl()).status();
      if (!put.ok()) {
        ADD_FAILURE() << "put: " << put;
        failures++;
        return;
      }
      absl::StatusOr<Tensor> fetched = client->Fetch(name);
      if (fetched.ok()) {
        uint32_t w = 0, i = 0;
        ::testing::AssertionResult decoded = DecodeVersion(TensorBytes(*fetched), &w, &i);
        if (!decoded) {
          ADD_FAILURE() << "fetch racing deletes: " << decoded.message();
          failures++;
        }
      } else if (fetched.status().code() != absl::StatusCode::kNotFound) {
        ADD_FAILURE() << "fetch racing deletes: " << fetched.status();
        failures++;
      }
      absl::Status removed = client->Delete(name).status();
      if (!removed.ok() && removed.code() != absl::StatusCode::kNotFound) {
        ADD_FAILURE() << "delete: " << removed;
        failures++;
      }
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t writer = 0; writer < kRacers; ++writer) threads.emplace_back(racer, writer);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

// Stat and small fetches are unary calls on a completion queue each thread
// keeps (client/src/unary_byte_call.cc): threads that come and go, clients
// a thread outlives, and a call that ended at its deadline must leave each
// call its own answer. Each thread alternates between two tensors of
// different sizes and bytes, so an answer meant for another call shows.
TEST_P(ConcurrencyTest, SmallCallsFromThreadsAndClientsThatComeAndGo) {
  constexpr int kRounds = 6;
  constexpr int kThreadsPerRound = 4;
  struct Stored {
    std::string name;
    std::vector<uint8_t> bytes;
    uint64_t version = 0;
  };
  std::vector<Stored> stored(kThreadsPerRound);
  for (int t = 0; t < kThreadsPerRound; ++t) {
    stored[t].name = TestTensorName(absl::StrCat("small", t));
    stored[t].bytes = PatternBytes(1024 + 512 * t, 40 + t);  // inline: under 32 KiB
    HostTensor tensor =
        CompactTensor(kU8, {static_cast<int64_t>(stored[t].bytes.size())}, stored[t].bytes);
    absl::StatusOr<TensorInfo> put = client().Put(stored[t].name, tensor.dl());
    ASSERT_TRUE(put.ok()) << put.status();
    stored[t].version = put->version;
  }
  std::atomic<int> failures{0};
  auto small_calls = [&](Client& on, int t, const char* which) {
    for (int call = 0; call < 6; ++call) {
      const Stored& want = stored[(t + call) % kThreadsPerRound];
      absl::StatusOr<TensorInfo> stat = on.Stat(want.name);
      absl::StatusOr<Tensor> fetched = on.Fetch(want.name);
      if (!stat.ok() || stat->version != want.version || stat->total_bytes != want.bytes.size() ||
          !fetched.ok() || fetched->info().version != want.version ||
          TensorBytes(*fetched) != want.bytes) {
        ADD_FAILURE() << which << ", " << want.name << ": stat " << stat.status() << ", fetch "
                      << fetched.status();
        failures++;
        return;
      }
    }
  };
  for (int round = 0; round < kRounds && failures.load() == 0; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreadsPerRound; ++t) {
      threads.emplace_back([&, t] {
        if (t == 0) {
          // A call that ends at a deadline too short to be met, then
          // calls on the same thread.
          ClientOptions hurried = RemoteClientOptions();
          hurried.timeout = absl::Microseconds(1);
          std::unique_ptr<Client> rushed = ConnectClient(server().address(), hurried);
          if (rushed == nullptr) {
            failures++;
            return;
          }
          absl::StatusOr<TensorInfo> late = rushed->Stat(stored[0].name);
          if (!late.ok() && late.status().code() != absl::StatusCode::kDeadlineExceeded) {
            ADD_FAILURE() << "a call past its deadline: " << late.status();
            failures++;
          }
          return small_calls(client(), t, "shared client after a deadline");
        }
        if (t % 2 == 0) return small_calls(client(), t, "shared client");
        // A client of its own, gone before the thread's last calls.
        std::unique_ptr<Client> own = ConnectClient(server().address(), RemoteClientOptions());
        if (own == nullptr) {
          failures++;
          return;
        }
        small_calls(*own, t, "own client");
        own.reset();
        small_calls(client(), t, "shared client after its own");
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
}

// gRPC's retry machinery, off by default, still works when asked for.
TEST_P(ConcurrencyTest, ClientWithGrpcRetriesServesCalls) {
  ClientOptions options = RemoteClientOptions();
  options.grpc_retries = true;
  std::unique_ptr<Client> retrying = ConnectClient(server().address(), options);
  ASSERT_NE(retrying, nullptr);
  const std::string name = TestTensorName("with-retries");
  HostTensor small = VersionTensor(3, 1);
  absl::StatusOr<TensorInfo> put = retrying->Put(name, small.dl());
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<TensorInfo> stat = retrying->Stat(name);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->version, put->version);
  absl::StatusOr<Tensor> fetched = retrying->Fetch(name);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  uint32_t writer = 0, iteration = 0;
  EXPECT_TRUE(DecodeVersion(TensorBytes(*fetched), &writer, &iteration));
  EXPECT_EQ(writer, 3u);
  EXPECT_EQ(iteration, 1u);
}

INSTANTIATE_TEST_SUITE_P(Transports, ConcurrencyTest, kBothTransports, TransportParamName);

}  // namespace
}  // namespace tensord::testing
