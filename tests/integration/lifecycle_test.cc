// The server process's life: startup (ready file, --preload, bad flags),
// and graceful shutdown on SIGTERM/SIGINT, also with a fetch in flight.
// Each test starts servers of its own.
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/mutex.h"
#include "tests/integration/client_test_support.h"

namespace tensord::testing {
namespace {

std::unique_ptr<ServerProcess> StartServer(Transport transport,
                                           std::vector<std::string> flags = {}) {
  ServerProcessOptions options;
  options.transport = transport;
  options.flags = std::move(flags);
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

::testing::AssertionResult ExitedCleanly(const absl::StatusOr<int>& wait_status,
                                         const ServerProcess& server) {
  if (!wait_status.ok()) {
    return ::testing::AssertionFailure() << wait_status.status() << "; stderr:\n"
                                         << server.StderrTail();
  }
  if (WIFEXITED(*wait_status) && WEXITSTATUS(*wait_status) == 0) {
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  if (WIFEXITED(*wait_status)) {
    failure << "exit code " << WEXITSTATUS(*wait_status);
  } else if (WIFSIGNALED(*wait_status)) {
    failure << "killed by signal " << strsignal(WTERMSIG(*wait_status));
  }
  return failure << "; stderr:\n" << server.StderrTail();
}

class LifecycleTest : public ::testing::TestWithParam<Transport> {};

TEST_P(LifecycleTest, ReadyFileNamesTheBoundAddress) {
  std::unique_ptr<ServerProcess> server = StartServer(GetParam());
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->pid(), 0);
  EXPECT_TRUE(server->Alive());
  if (GetParam() == Transport::kTcp) {
    EXPECT_TRUE(absl::StartsWith(server->address(), "127.0.0.1:")) << server->address();
    EXPECT_FALSE(absl::EndsWith(server->address(), ":0")) << "port 0 is resolved to the bound port";
  } else {
    EXPECT_EQ(server->address(), absl::StrCat("unix:", server->temp_dir(), "/tensord.sock"));
    struct stat socket_stat;
    ASSERT_EQ(stat(absl::StrCat(server->temp_dir(), "/tensord.sock").c_str(), &socket_stat), 0);
    EXPECT_TRUE(S_ISSOCK(socket_stat.st_mode));
  }
  std::unique_ptr<Client> client = ConnectClient(server->address(), RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  ExpectServing(*client);
}

TEST_P(LifecycleTest, IdleServerExitsZeroOnSigtermAndSigint) {
  for (int signal : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(strsignal(signal));
    std::unique_ptr<ServerProcess> server = StartServer(GetParam());
    ASSERT_NE(server, nullptr);
    EXPECT_TRUE(ExitedCleanly(server->Stop(signal, absl::Seconds(15)), *server));
    EXPECT_FALSE(server->Alive());
  }
}

// Puts `bytes` bytes, then fetches them while SIGTERM arrives. The fetch is
// slowed by its progress callback so that it is surely in flight.
struct FetchDuringShutdown {
  absl::Status fetch_status;
  bool bytes_intact = false;
  bool progress_seen = false;
};

FetchDuringShutdown FetchWhileStopping(ServerProcess& server, size_t bytes,
                                       absl::StatusOr<int>* wait_status) {
  FetchDuringShutdown result;
  std::unique_ptr<Client> client = ConnectClient(server.address(), RemoteClientOptions());
  if (client == nullptr) return result;
  const std::string name = "shutdown/large";
  HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(bytes)}, PatternBytes(bytes, 77));
  absl::Status put = client->Put(name, tensor.dl()).status();
  EXPECT_TRUE(put.ok()) << put;
  if (!put.ok()) return result;

  tensord::Notification in_flight;
  std::atomic<bool> progress_seen{false};
  std::thread fetcher([&] {
    FetchOptions options;
    options.progress = [&](uint64_t done, uint64_t total) {
      if (!progress_seen.exchange(true)) in_flight.Notify();
      absl::SleepFor(absl::Milliseconds(3));
    };
    absl::StatusOr<Tensor> fetched = client->Fetch(name, options);
    result.fetch_status = fetched.status();
    if (fetched.ok()) {
      result.bytes_intact =
          fetched->data_bytes() == bytes &&
          std::memcmp(fetched->dl_tensor().data, tensor.storage.data(), bytes) == 0;
    }
    if (!in_flight.HasBeenNotified()) in_flight.Notify();
  });
  // Without progress reports, signal a moment after the fetch started.
  in_flight.WaitForNotificationWithTimeout(absl::Seconds(3));
  *wait_status = server.Stop(SIGTERM, absl::Seconds(30));
  fetcher.join();
  result.progress_seen = progress_seen.load();
  return result;
}

// A fetch in flight at SIGTERM either completes with every byte or fails
// with a clean status; it never "succeeds" with partial bytes, and the
// server exits 0.
::testing::AssertionResult FetchEndedCleanly(const FetchDuringShutdown& result) {
  if (result.fetch_status.ok()) {
    if (result.bytes_intact) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "a fetch that reports success must have all its bytes";
  }
  switch (result.fetch_status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
      std::fprintf(stderr, "note: the fetch in flight at SIGTERM ended with %s\n",
                   result.fetch_status.ToString().c_str());
      return ::testing::AssertionSuccess();
    default: return ::testing::AssertionFailure() << "unclean failure: " << result.fetch_status;
  }
}

TEST_P(LifecycleTest, SigtermDuringAFetchWithTheDefaultGrace) {
  // 64 MiB in 256 KiB chunks: ~256 slowed-down messages, well within the
  // default 10 s grace. The server waits for its fetch bytes to leave and
  // lingers briefly for readers, but a reader slower than that can still see
  // UNAVAILABLE "Broken pipe" once the process is gone (gRPC fails the stream
  // when its window update cannot be written), so a clean failure is allowed.
  std::unique_ptr<ServerProcess> server = StartServer(GetParam(), {"--chunk-bytes=256KiB"});
  ASSERT_NE(server, nullptr);
  absl::StatusOr<int> wait_status = absl::UnknownError("not stopped");
  FetchDuringShutdown result = FetchWhileStopping(*server, 64 << 20, &wait_status);
  EXPECT_TRUE(result.progress_seen) << "Fetch reported no progress";
  EXPECT_TRUE(FetchEndedCleanly(result));
  EXPECT_TRUE(ExitedCleanly(wait_status, *server));
}

TEST_P(LifecycleTest, SigtermWithoutGraceEndsAFetchCleanly) {
  std::unique_ptr<ServerProcess> server =
      StartServer(GetParam(), {"--chunk-bytes=256KiB", "--shutdown-grace=0s"});
  ASSERT_NE(server, nullptr);
  absl::StatusOr<int> wait_status = absl::UnknownError("not stopped");
  FetchDuringShutdown result = FetchWhileStopping(*server, 64 << 20, &wait_status);
  EXPECT_TRUE(FetchEndedCleanly(result));
  EXPECT_TRUE(ExitedCleanly(wait_status, *server));
}

// ---- --preload ----

void AppendLittleEndian64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

// A .safetensors file: 8-byte header length, JSON header, data.
std::string SafetensorsFile(const std::string& header_json, const std::string& data) {
  std::string header = header_json;
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string file;
  AppendLittleEndian64(file, header.size());
  file += header;
  file += data;
  return file;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

class PreloadTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "tensord-preload-" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string dir_;
};

TEST_P(PreloadTest, PublishesTheFileAtStartup) {
  std::vector<float> weight = {1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -0.5f};
  std::vector<int64_t> bias = {-1, 0, 1 << 30};
  std::vector<uint8_t> mask = {1, 0, 0, 1};
  std::string data(reinterpret_cast<const char*>(weight.data()), 24);
  data.append(reinterpret_cast<const char*>(bias.data()), 24);
  data.append(reinterpret_cast<const char*>(mask.data()), 4);
  const std::string path = dir_ + "/model.safetensors";
  WriteFile(path, SafetensorsFile(R"({"__metadata__":{"format":"pt"},)"
                                  R"("weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                                  R"("bias":{"dtype":"I64","shape":[3],"data_offsets":[24,48]},)"
                                  R"("mask":{"dtype":"BOOL","shape":[4],"data_offsets":[48,52]}})",
                                  data));

  std::unique_ptr<ServerProcess> server =
      StartServer(GetParam(), {"--preload=" + path, "--preload-prefix=model/"});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Client> client = ConnectClient(server->address(), RemoteClientOptions());
  ASSERT_NE(client, nullptr);

  absl::StatusOr<std::vector<TensorInfo>> all = client->ListAll("");
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> names;
  for (const TensorInfo& info : *all) names.push_back(info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"model/bias", "model/mask", "model/weight"}));

  absl::StatusOr<Tensor> fetched = client->Fetch("model/weight");
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->info().dtype.code, dlpack::kFloat);
  EXPECT_EQ(fetched->info().dtype.bits, 32);
  EXPECT_EQ(fetched->info().shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), weight.data(), 24));

  fetched = client->Fetch("model/bias");
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->info().dtype.code, dlpack::kInt);
  EXPECT_EQ(fetched->info().dtype.bits, 64);
  EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), bias.data(), 24));

  fetched = client->Fetch("model/mask");
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->info().dtype.code, dlpack::kBool);
  EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), mask.data(), 4));

  // Preloaded tensors are ordinary versions: they can be replaced.
  HostTensor replacement = CompactTensor(kF32, {1}, {0, 0, 128, 63});
  EXPECT_TRUE(client->Put("model/weight", replacement.dl()).ok());
}

TEST_P(PreloadTest, CorruptFileFailsStartup) {
  const std::string path = dir_ + "/corrupt.safetensors";
  WriteFile(path, SafetensorsFile(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,999]}})",
                                  std::string(16, '\0')));
  ServerProcessOptions options;
  options.transport = GetParam();
  options.flags = {"--preload=" + path};
  options.ready_timeout = absl::Seconds(20);
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_FALSE(server.ok()) << "a corrupt --preload file must stop the server from serving";
  EXPECT_TRUE(absl::StrContains(server.status().message(), "exited with code")) << server.status();
  EXPECT_TRUE(absl::StrContains(server.status().message(), path)) << server.status();
}

TEST_P(PreloadTest, MissingFileFailsStartup) {
  ServerProcessOptions options;
  options.transport = GetParam();
  options.flags = {"--preload=" + dir_ + "/does-not-exist.safetensors"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::StrContains(server.status().message(), "does-not-exist.safetensors"))
      << server.status();
}

TEST_P(LifecycleTest, InvalidFlagsFailStartup) {
  for (std::string flag : {"--max-host-bytes=lots", "--log-level=chatty", "--chunk-bytes=2GiB"}) {
    SCOPED_TRACE(flag);
    ServerProcessOptions options;
    options.transport = GetParam();
    options.flags = {flag};
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
    ASSERT_FALSE(server.ok()) << "tensord started with " << flag;
    EXPECT_TRUE(absl::StrContains(server.status().message(), "exited with code"))
        << server.status();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, LifecycleTest, kBothTransports, TransportParamName);
INSTANTIATE_TEST_SUITE_P(Transports, PreloadTest, kBothTransports, TransportParamName);

}  // namespace
}  // namespace tensord::testing
