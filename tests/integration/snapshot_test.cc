// Snapshots through a real tensord: an explicit snapshot survives SIGKILL,
// SIGTERM writes one, a damaged one stops the start unless ignored, and
// cache tensors are evicted and never snapshotted.
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tensord-snapshots-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    snapshot_dir_ = pattern;
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    std::filesystem::remove_all(snapshot_dir_);
  }

  // `ready_timeout`: a start that restores 100,000 tensors under ASan on a
  // busy CI machine needs longer than the default.
  absl::StatusOr<std::unique_ptr<ServerProcess>> TryStart(
      std::vector<std::string> flags = {},
      absl::Duration ready_timeout = ServerProcessOptions().ready_timeout) {
    ServerProcessOptions options;
    options.ready_timeout = ready_timeout;
    options.flags = {"--snapshot-dir=" + snapshot_dir_};
    options.flags.insert(options.flags.end(), flags.begin(), flags.end());
    return ServerProcess::Start(options);
  }

  void Start(std::vector<std::string> flags = {},
             absl::Duration ready_timeout = ServerProcessOptions().ready_timeout) {
    client_.reset();
    absl::StatusOr<std::unique_ptr<ServerProcess>> started =
        TryStart(std::move(flags), ready_timeout);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    client_ = ConnectClient(server_->address(), RemoteClientOptions());
    ASSERT_NE(client_, nullptr);
  }

  TensorInfo PutBytes(const std::string& name, const std::vector<uint8_t>& bytes,
                      Retention retention) {
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(bytes.size())}, bytes);
    PutOptions options;
    options.retention = retention;
    absl::StatusOr<TensorInfo> put = client_->Put(name, tensor.dl(), options);
    EXPECT_TRUE(put.ok()) << name << ": " << put.status();
    return put.value_or(TensorInfo{});
  }

  ::testing::AssertionResult HasBytes(const std::string& name, const std::vector<uint8_t>& bytes) {
    FetchOptions options;
    options.verify_crc32c = true;
    absl::StatusOr<Tensor> fetched = client_->Fetch(name, options);
    if (!fetched.ok()) return ::testing::AssertionFailure() << name << ": " << fetched.status();
    std::vector<uint8_t> got = TensorBytes(*fetched);
    return BytesEqual(got.data(), got.size(), bytes);
  }

  std::string snapshot_path() const { return snapshot_dir_ + "/tensord.snapshot"; }

  std::string snapshot_dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(SnapshotTest, EveryDurableTensorSurvivesSigkillAfterAnExplicitSnapshot) {
  Start();
  struct Stored {
    std::vector<uint8_t> bytes;
    TensorInfo info;
  };
  std::map<std::string, Stored> durable;
  std::vector<std::string> cached;
  const size_t sizes[] = {0, 1, 4096, 100'000, 3 << 20};
  for (int i = 0; i < 15; ++i) {
    const std::string name = absl::StrCat("durable/", i);
    const Retention retention = i % 3 == 0   ? Retention::kCache
                                : i % 3 == 1 ? Retention::kPinned
                                             : Retention::kDefault;
    std::vector<uint8_t> bytes = PatternBytes(sizes[i % 5], 1000 + i);
    TensorInfo info = PutBytes(name, bytes, retention);
    ASSERT_FALSE(HasFailure());
    if (retention == Retention::kCache) {
      cached.push_back(name);
    } else {
      durable[name] = Stored{std::move(bytes), info};
    }
  }
  // A replaced tensor: only its latest version is durable.
  std::vector<uint8_t> newer = PatternBytes(777, 77);
  durable["durable/2"] = Stored{newer, PutBytes("durable/2", newer, Retention::kDefault)};

  absl::StatusOr<SnapshotResult> snapshot = client_->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->path, snapshot_path());
  EXPECT_EQ(snapshot->tensor_count, durable.size());
  // Acknowledged after the snapshot: lost by a crash, by design.
  PutBytes("after/snapshot", PatternBytes(10, 1), Retention::kDefault);

  absl::StatusOr<int> killed = server_->Stop(SIGKILL);
  ASSERT_TRUE(killed.ok() && WIFSIGNALED(*killed)) << killed.status();
  Start();
  uint64_t highest = 0;
  for (const auto& [name, stored] : durable) {
    EXPECT_TRUE(HasBytes(name, stored.bytes)) << name;
    absl::StatusOr<TensorInfo> info = client_->Stat(name);
    ASSERT_TRUE(info.ok()) << name << ": " << info.status();
    EXPECT_EQ(info->version, stored.info.version) << name;
    EXPECT_EQ(info->retention, stored.info.retention) << name;
    EXPECT_EQ(info->crc32c, stored.info.crc32c) << name;
    EXPECT_EQ(info->created, stored.info.created) << name;
    highest = std::max(highest, info->version);
  }
  for (const std::string& name : cached) {
    EXPECT_EQ(client_->Stat(name).status().code(), absl::StatusCode::kNotFound) << name;
  }
  EXPECT_EQ(client_->Stat("after/snapshot").status().code(), absl::StatusCode::kNotFound);
  // New versions number on from the restored ones.
  EXPECT_GT(PutBytes("fresh", PatternBytes(8, 8), Retention::kDefault).version, highest);
}

TEST_F(SnapshotTest, SigtermWritesASnapshotThatTheNextStartRestores) {
  Start();
  std::vector<uint8_t> bytes = PatternBytes(2 << 20, 5);
  PutBytes("on/shutdown", bytes, Retention::kDefault);
  absl::StatusOr<int> stopped = server_->Stop(SIGTERM);
  ASSERT_TRUE(stopped.ok() && WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0)
      << server_->StderrTail();
  EXPECT_TRUE(absl::StrContains(server_->Stderr(), "event=snapshot_written"));
  Start();
  EXPECT_TRUE(HasBytes("on/shutdown", bytes));
}

// A group's items survive a restart with their shared version; the group
// record does not (a snapshot may hold only part of a group), so fetching
// the group says so rather than passing a part for the whole.
TEST_F(SnapshotTest, AnAtomicGroupsItemsSurviveARestartWithTheirVersion) {
  Start();
  std::vector<HostTensor> tensors;
  std::vector<std::string> names = {"model/a", "model/b", "model/c"};
  for (size_t i = 0; i < names.size(); ++i) {
    tensors.push_back(CompactTensor(kU8, {static_cast<int64_t>(1000 * (i + 1))},
                                    PatternBytes(1000 * (i + 1), i)));
  }
  std::vector<BatchPutItem> items;
  for (size_t i = 0; i < names.size(); ++i) items.push_back({names[i], tensors[i].dl()});
  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> put = client_->BatchPut(items, atomic);
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_NE(put->group_version, 0u) << put->items[0].status();
  PutBytes("after", PatternBytes(10, 9), Retention::kDefault);  // a later, single version
  ASSERT_TRUE(client_->Snapshot().ok());
  ASSERT_TRUE(server_->Stop(SIGKILL).ok());

  Start();
  absl::StatusOr<std::vector<Tensor>> restored = client_->BatchFetchPrefix("model/");
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ((*restored)[i].info().name, names[i]);
    EXPECT_EQ((*restored)[i].info().version, put->group_version);
    EXPECT_EQ(TensorBytes((*restored)[i]), tensors[i].storage);
  }
  absl::Status group = client_->BatchFetchGroup(put->group_version).status();
  EXPECT_EQ(group.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(group.message(), "since this server started")) << group;
  EXPECT_TRUE(HasBytes("after", PatternBytes(10, 9)));
}

TEST_F(SnapshotTest, DamagedSnapshotStopsTheStartUnlessIgnoredThenLoadsOnlyValidTensors) {
  Start();
  std::vector<uint8_t> good = PatternBytes(5000, 1);
  std::vector<uint8_t> bad = PatternBytes(5000, 2);
  PutBytes("good", good, Retention::kDefault);
  PutBytes("bad", bad, Retention::kDefault);
  ASSERT_TRUE(client_->Snapshot().ok());
  ASSERT_TRUE(server_->Stop(SIGKILL).ok());

  // Flip one byte of "bad"'s data, found in the file by its content.
  std::string file = ReadWholeFile(snapshot_path());
  const std::string needle(reinterpret_cast<const char*>(bad.data()), 64);
  const size_t at = file.find(needle);
  ASSERT_NE(at, std::string::npos);
  file[at + 10] ^= 0x04;
  WriteWholeFile(snapshot_path(), file);

  absl::StatusOr<std::unique_ptr<ServerProcess>> refused = TryStart();
  ASSERT_FALSE(refused.ok()) << "tensord started with a damaged snapshot";
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "event=snapshot_tensor_corrupt"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), snapshot_path())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "name=bad")) << refused.status();

  Start({"--snapshot-ignore-corrupt"});
  EXPECT_TRUE(HasBytes("good", good));
  EXPECT_EQ(client_->Stat("bad").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadWholeFile(snapshot_path() + ".corrupt"), file);
}

TEST_F(SnapshotTest, TruncatedSnapshotStopsTheStartNamingTheReason) {
  Start();
  PutBytes("t", PatternBytes(100'000, 3), Retention::kDefault);
  ASSERT_TRUE(client_->Snapshot().ok());
  ASSERT_TRUE(server_->Stop(SIGKILL).ok());
  std::string file = ReadWholeFile(snapshot_path());
  WriteWholeFile(snapshot_path(), file.substr(0, file.size() / 2));
  absl::StatusOr<std::unique_ptr<ServerProcess>> refused = TryStart();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "event=snapshot_corrupt"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "inside the")) << refused.status();
}

TEST_F(SnapshotTest, LocalPutAndCreateSealCarryTheirRetention) {
  const std::string socket_path = snapshot_dir_ + "/handoff.sock";
  Start({"--handoff-socket=" + socket_path});
  ClientOptions options;
  options.path = TransferPath::kLocal;
  options.handoff_socket = socket_path;
  std::unique_ptr<Client> local = ConnectClient(server_->address(), options);
  ASSERT_NE(local, nullptr);
  HostTensor tensor = CompactTensor(kU8, {64}, PatternBytes(64, 6));
  PutOptions cache;
  cache.retention = Retention::kCache;
  absl::StatusOr<TensorInfo> put = local->Put("local/cache", tensor.dl(), cache);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->retention, Retention::kCache);
  const std::vector<int64_t> shape = {16};
  absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
      local->Create("local/pinned", kF32, shape, Retention::kPinned);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::memset((*writer)->data(), 1, (*writer)->size());
  ASSERT_TRUE((*writer)->Seal().ok());
  EXPECT_EQ(client_->Stat("local/cache")->retention, Retention::kCache);
  EXPECT_EQ(client_->Stat("local/pinned")->retention, Retention::kPinned);
  absl::StatusOr<SnapshotResult> snapshot = local->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->tensor_count, 1u);  // the cache tensor is not durable
}

TEST_F(SnapshotTest, VersionsNeverGoBackwardsAcrossARestart) {
  ASSERT_NO_FATAL_FAILURE(Start());
  PutBytes("kept", PatternBytes(10, 1), Retention::kDefault);
  const uint64_t cached = PutBytes("cached", PatternBytes(10, 2), Retention::kCache).version;
  const uint64_t deleted = PutBytes("deleted", PatternBytes(10, 3), Retention::kDefault).version;
  ASSERT_TRUE(client_->Delete("deleted").ok());
  ASSERT_TRUE(server_->Stop(SIGTERM).ok());
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_GT(PutBytes("after", PatternBytes(10, 4), Retention::kDefault).version,
            std::max(cached, deleted));
}

// A .safetensors file of `tensors` (name, bytes), each a u8 vector.
std::string SafetensorsFile(const std::vector<std::pair<std::string, std::string>>& tensors) {
  std::string header = "{";
  std::string data;
  for (const auto& [name, bytes] : tensors) {
    if (header.size() > 1) header += ",";
    header +=
        absl::StrCat("\"", name, "\":{\"dtype\":\"U8\",\"shape\":[", bytes.size(),
                     "],\"data_offsets\":[", data.size(), ",", data.size() + bytes.size(), "]}");
    data += bytes;
  }
  header += "}";
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  return file + header + data;
}

// Preloaded tensors are pinned, so snapshotted; an unchanged file is not
// published a second time over the restored copies (which would need the
// room for both and, near --max-host-bytes, stop every start).
TEST_F(SnapshotTest, RestartWithTheSamePreloadFileDoesNotRepublishIt) {
  constexpr size_t kBytes = 400 * 1024;
  const std::string path = snapshot_dir_ + "/model.safetensors";
  std::string first(kBytes, 'a'), second(kBytes, 'b');
  WriteWholeFile(path, SafetensorsFile({{"first", first}, {"second", second}}));
  const std::vector<std::string> flags = {"--preload=" + path, "--max-host-bytes=1MiB"};
  ASSERT_NO_FATAL_FAILURE(Start(flags));
  const uint64_t version = client_->Stat("second")->version;
  ASSERT_TRUE(server_->Stop(SIGTERM).ok());

  ASSERT_NO_FATAL_FAILURE(Start(flags));
  EXPECT_TRUE(absl::StrContains(server_->Stderr(), "event=preload_skipped"));
  EXPECT_TRUE(absl::StrContains(server_->Stderr(), "reason=unchanged"));
  EXPECT_EQ(client_->Stat("second")->version, version);
  ASSERT_TRUE(server_->Stop(SIGTERM).ok());

  // A changed tensor is published again; the unchanged one is not.
  second[7] = 'c';
  WriteWholeFile(path, SafetensorsFile({{"first", first}, {"second", second}}));
  ASSERT_NO_FATAL_FAILURE(Start({"--preload=" + path}));
  EXPECT_GT(client_->Stat("second")->version, version);
  std::vector<uint8_t> want(second.begin(), second.end());
  EXPECT_TRUE(HasBytes("second", want));
}

// Small tensors share arenas, so a server holds, snapshots and restores far
// more of them than it has fds (one memfd each stopped near 20,000).
TEST_F(SnapshotTest, AHundredThousandSmallTensorsSnapshotAndRestoreInAFewFds) {
  constexpr int kTensors = 100'000;
  constexpr absl::Duration kManyTensorsReadyTimeout = absl::Seconds(90);
  constexpr size_t kBytes = 256;
  std::vector<std::pair<std::string, std::string>> tensors;
  tensors.reserve(kTensors);
  for (int i = 0; i < kTensors; ++i) {
    const std::vector<uint8_t> bytes = PatternBytes(kBytes, i);
    tensors.emplace_back(absl::StrCat("kv/", i), std::string(bytes.begin(), bytes.end()));
  }
  const std::string path = snapshot_dir_ + "/many.safetensors";
  WriteWholeFile(path, SafetensorsFile(tensors));
  ASSERT_NO_FATAL_FAILURE(Start({"--preload=" + path}, kManyTensorsReadyTimeout));
  absl::StatusOr<SnapshotResult> snapshot = client_->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->tensor_count, static_cast<uint64_t>(kTensors));
  EXPECT_EQ(snapshot->total_bytes, kTensors * kBytes);
  ASSERT_TRUE(server_->Stop(SIGKILL).ok());

  ASSERT_NO_FATAL_FAILURE(Start({}, kManyTensorsReadyTimeout));
  EXPECT_TRUE(absl::StrContains(server_->Stderr(), absl::StrCat("tensors=", kTensors, " ")))
      << server_->StderrTail();
  EXPECT_LT(CountOpenFds(absl::StrCat("/proc/", server_->pid(), "/fd")), 200u);
  for (int i = 0; i < kTensors; i += 997) {
    EXPECT_TRUE(HasBytes(absl::StrCat("kv/", i), PatternBytes(kBytes, i))) << i;
  }
  EXPECT_TRUE(HasBytes(absl::StrCat("kv/", kTensors - 1), PatternBytes(kBytes, kTensors - 1)));
}

TEST_F(SnapshotTest, SnapshotBeyondLoweredLimitsStopsTheStartUnlessIgnored) {
  ASSERT_NO_FATAL_FAILURE(Start());
  PutBytes("a", PatternBytes(600 * 1024, 1), Retention::kDefault);
  PutBytes("b", PatternBytes(600 * 1024, 2), Retention::kDefault);
  ASSERT_TRUE(server_->Stop(SIGTERM).ok());

  absl::StatusOr<std::unique_ptr<ServerProcess>> refused = TryStart({"--max-host-bytes=1MiB"});
  ASSERT_FALSE(refused.ok()) << "tensord started with a snapshot beyond --max-host-bytes";
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--max-host-bytes"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "1228800 bytes")) << refused.status();

  ASSERT_NO_FATAL_FAILURE(Start({"--max-host-bytes=1MiB", "--snapshot-ignore-corrupt"}));
  EXPECT_TRUE(HasBytes("a", PatternBytes(600 * 1024, 1)));
  EXPECT_EQ(client_->Stat("b").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(server_->Stderr(), "event=snapshot_tensor_skipped"));
}

TEST_F(SnapshotTest, SecondServerOnTheSameSnapshotDirRefusesToStart) {
  ASSERT_NO_FATAL_FAILURE(Start());
  absl::StatusOr<std::unique_ptr<ServerProcess>> second = TryStart();
  ASSERT_FALSE(second.ok()) << "two servers share " << snapshot_dir_;
  EXPECT_TRUE(absl::StrContains(second.status().message(), snapshot_dir_)) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "in use")) << second.status();
  EXPECT_TRUE(server_->Alive());
  EXPECT_TRUE(client_->Snapshot().ok());
}

TEST(SnapshotOffTest, SnapshotWithoutSnapshotDirIsFailedPrecondition) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<Client> client = ConnectClient((*server)->address(), RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(StatusIs(client->Snapshot().status(), absl::StatusCode::kFailedPrecondition,
                       "--snapshot-dir"));
}

// Cache puts fill memory; a put that does not fit evicts the least recently
// used unleased cache tensor, and only durable ones left means
// RESOURCE_EXHAUSTED.
class EvictionTest : public ClientServerTest<EvictionTest> {
 public:
  static std::vector<std::string> ServerFlags() { return {"--max-host-bytes=1MiB"}; }
};

TEST_P(EvictionTest, PutsEvictLeastRecentlyUsedCacheTensorsThenRefuse) {
  constexpr size_t kBytes = 300 * 1024;
  auto put = [&](const std::string& name, Retention retention) {
    HostTensor tensor = CompactTensor(kU8, {kBytes}, PatternBytes(kBytes, name.size()));
    PutOptions options;
    options.retention = retention;
    return client().Put(TestTensorName(name), tensor.dl(), options);
  };
  auto present = [&](const std::string& name) { return client().Stat(TestTensorName(name)).ok(); };
  ASSERT_TRUE(put("c0", Retention::kCache).ok());
  ASSERT_TRUE(put("c1", Retention::kCache).ok());
  ASSERT_TRUE(put("c2", Retention::kCache).ok());
  ASSERT_TRUE(client().Fetch(TestTensorName("c0")).ok());  // c0 is now the most recent
  EXPECT_EQ(client().Stat(TestTensorName("c0"))->retention, Retention::kCache);

  ASSERT_TRUE(put("d0", Retention::kDefault).ok());
  EXPECT_FALSE(present("c1"));
  EXPECT_TRUE(present("c0") && present("c2"));
  ASSERT_TRUE(put("d1", Retention::kPinned).ok());
  EXPECT_FALSE(present("c2"));
  EXPECT_EQ(client().Stat(TestTensorName("d1"))->retention, Retention::kPinned);
  ASSERT_TRUE(put("d2", Retention::kDefault).ok());
  EXPECT_FALSE(present("c0"));
  absl::StatusOr<TensorInfo> refused = put("d3", Retention::kDefault);
  EXPECT_TRUE(StatusIs(refused.status(), absl::StatusCode::kResourceExhausted, "--max-host-bytes"));
  for (const char* name : {"d0", "d1", "d2"}) {
    EXPECT_TRUE(present(name)) << name;
    EXPECT_TRUE(client().Delete(TestTensorName(name)).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, EvictionTest, kBothTransports, TransportParamName);

}  // namespace
}  // namespace tensord::testing
