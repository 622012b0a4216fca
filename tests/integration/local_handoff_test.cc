// Zero-copy local handoff through a real tensord: memfd mappings, leases,
// create/seal, peer credentials, and cleanup when a client dies.
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/unix_socket.h"
#include "tensord/client.h"
#include "tensord/v1/handoff.pb.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/handoff_server_test.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

class LocalHandoffTest : public HandoffServerTest<::testing::Test> {
 protected:
  void SetUp() override { StartServer({}); }

  void StartServer(std::vector<std::string> extra_flags) {
    std::vector<std::string> flags = {"--max-host-bytes=256MiB"};
    for (std::string& flag : extra_flags) flags.push_back(std::move(flag));
    StartServerWith(std::move(flags));
  }

  // Puts `size` pattern bytes as a uint8 vector through the remote path.
  std::vector<uint8_t> PutBytes(const std::string& name, size_t size, uint64_t seed) {
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, seed));
    DLTensor dl = tensor.dl();
    absl::StatusOr<TensorInfo> put = remote_->Put(name, dl);
    EXPECT_TRUE(put.ok()) << put.status();
    return tensor.storage;
  }
};

TEST_F(LocalHandoffTest, LocalFetchIsTheServersMemfdAndMatchesRemote) {
  std::vector<uint8_t> bytes = PutBytes("weights/a", 1 << 20, 1);
  ASSERT_TRUE(local_->local());
  absl::StatusOr<Tensor> local = local_->Fetch("weights/a");
  ASSERT_TRUE(local.ok()) << local.status();
  absl::StatusOr<Tensor> remote = remote_->Fetch("weights/a");
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_TRUE(BytesEqual(local->dl_tensor().data, local->data_bytes(), bytes));
  EXPECT_TRUE(BytesEqual(remote->dl_tensor().data, remote->data_bytes(), bytes));
  // The bytes are a mapping of the server's memfd, not a copy: a shared
  // arena's, since 1 MiB is small (--arena-max-tensor-bytes).
  std::string line = MapsLineOf(local->dl_tensor().data);
  EXPECT_TRUE(absl::StrContains(line, "memfd:tensord:arena-1048576")) << line;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(local->dl_tensor().data) % 256, 0u);
  DLManagedTensorVersioned* versioned = local->release_versioned();
  EXPECT_EQ(versioned->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  EXPECT_EQ(versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
  versioned->deleter(versioned);
  DLManagedTensorVersioned* copied = remote->release_versioned();
  EXPECT_NE(copied->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  copied->deleter(copied);
}

TEST_F(LocalHandoffTest, ConsumerWritesStayPrivate) {
  std::vector<uint8_t> bytes = PutBytes("kv/block", 64 * 1024, 2);
  absl::StatusOr<Tensor> writer = local_->Fetch("kv/block");
  ASSERT_TRUE(writer.ok()) << writer.status();
  // Legacy consumers such as PyTorch may write; copy-on-write keeps it local.
  std::memset(writer->dl_tensor().data, 0xee, 64 * 1024);
  absl::StatusOr<Tensor> other = local_->Fetch("kv/block");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(BytesEqual(other->dl_tensor().data, other->data_bytes(), bytes));
  absl::StatusOr<Tensor> remote = remote_->Fetch("kv/block");
  ASSERT_TRUE(remote.ok());
  EXPECT_TRUE(BytesEqual(remote->dl_tensor().data, remote->data_bytes(), bytes));
}

TEST_F(LocalHandoffTest, ReadOnlyFetchIsSharedReadOnlyAndFlagged) {
  PutBytes("ro", 8192, 3);
  FetchOptions options;
  options.read_only = true;
  absl::StatusOr<Tensor> tensor = local_->Fetch("ro", options);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  std::string line = MapsLineOf(tensor->dl_tensor().data);
  EXPECT_TRUE(absl::StrContains(line, " r--s ")) << line;
  DLManagedTensorVersioned* versioned = tensor->release_versioned();
  EXPECT_NE(versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
  versioned->deleter(versioned);
}

TEST_F(LocalHandoffTest, ReaderOfOldVersionKeepsItsBytes) {
  std::vector<uint8_t> first = PutBytes("rolling", 4096, 10);
  absl::StatusOr<Tensor> held = local_->Fetch("rolling");
  ASSERT_TRUE(held.ok());
  const uint64_t first_version = held->info().version;
  std::vector<uint8_t> second = PutBytes("rolling", 4096, 11);
  absl::StatusOr<Tensor> latest = local_->Fetch("rolling");
  ASSERT_TRUE(latest.ok());
  EXPECT_GT(latest->info().version, first_version);
  EXPECT_TRUE(BytesEqual(latest->dl_tensor().data, latest->data_bytes(), second));
  ASSERT_TRUE(remote_->Delete("rolling").ok());
  EXPECT_TRUE(BytesEqual(held->dl_tensor().data, held->data_bytes(), first));
  // The held old version is still served by number while the lease lives.
  absl::StatusOr<TensorInfo> old = remote_->Stat("rolling", first_version);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->open_leases, 1u);
}

TEST_F(LocalHandoffTest, CachedRepeatSharesOneLeaseUntilTheLastTensorGoes) {
  PutBytes("cached", 4096, 4);
  absl::StatusOr<Tensor> first = local_->Fetch("cached");
  absl::StatusOr<Tensor> second = local_->Fetch("cached");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(OpenLeases("cached"), 1u);
  DLManagedTensor* handed = first->release();
  *first = Tensor();
  EXPECT_EQ(OpenLeases("cached"), 1u);
  handed->deleter(handed);
  EXPECT_EQ(OpenLeases("cached"), 1u);  // `second` still holds it
  *second = Tensor();
  EXPECT_TRUE(WaitForLeases("cached", 0, absl::Seconds(2)));
}

TEST_F(LocalHandoffTest, CreateSealPublishesWhatWasWrittenInPlace) {
  std::vector<int64_t> shape = {128, 64};
  absl::StatusOr<std::unique_ptr<TensorWriter>> writer = local_->Create("made/here", kF32, shape);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_EQ((*writer)->size(), 128u * 64 * 4);
  auto* values = static_cast<float*>((*writer)->data());
  for (int i = 0; i < 128 * 64; ++i) values[i] = static_cast<float>(i) * 0.25f;
  EXPECT_EQ(remote_->Stat("made/here").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<TensorInfo> sealed = (*writer)->Seal(/*send_crc32c=*/true);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(sealed->shape, shape);
  absl::StatusOr<Tensor> fetched = remote_->Fetch("made/here");
  ASSERT_TRUE(fetched.ok());
  const auto* read = static_cast<const float*>(fetched->dl_tensor().data);
  for (int i = 0; i < 128 * 64; ++i) ASSERT_EQ(read[i], static_cast<float>(i) * 0.25f) << i;
}

TEST_F(LocalHandoffTest, CreateAskingForCopiesOnASingleNodeIsRefusedBeforeAnyByte) {
  CreateOptions options;
  options.replicas = 2;
  const uint64_t before = remote_->List("").value().total_bytes;
  absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
      local_->Create("single/copies", kU8, std::vector<int64_t>{4096}, options);
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kFailedPrecondition) << writer.status();
  EXPECT_TRUE(absl::StrContains(writer.status().message(), "replicas=2")) << writer.status();
  EXPECT_TRUE(absl::StrContains(writer.status().message(), "single node")) << writer.status();
  EXPECT_EQ(remote_->List("").value().total_bytes, before);
  // One copy is this node: sealed as ever.
  options.replicas = 1;
  writer = local_->Create("single/copies", kU8, std::vector<int64_t>{4096}, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::memset((*writer)->data(), 7, 4096);
  absl::StatusOr<TensorInfo> sealed = (*writer)->Seal(/*send_crc32c=*/false);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(remote_->Stat("single/copies").value().version, sealed->version);
}

TEST_F(LocalHandoffTest, AbandonedCreatePublishesNothingAndFreesItsBytes) {
  const uint64_t before = remote_->List("").value().total_bytes;
  {
    absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
        local_->Create("never/sealed", kU8, std::vector<int64_t>{1 << 20});
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::memset((*writer)->data(), 1, 1 << 20);
    EXPECT_EQ(remote_->List("").value().total_bytes, before + (1 << 20));
  }  // destroyed unsealed: aborted
  EXPECT_EQ(remote_->Stat("never/sealed").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(remote_->List("").value().total_bytes, before);
}

TEST_F(LocalHandoffTest, CreateNeverSealedIsReclaimedAfterTheTimeout) {
  StartServer({"--create-timeout=1s"});
  const uint64_t before = remote_->List("").value().total_bytes;
  absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
      local_->Create("slow/producer", kU8, std::vector<int64_t>{4096});
  ASSERT_TRUE(writer.ok()) << writer.status();
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (remote_->List("").value().total_bytes != before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(remote_->List("").value().total_bytes, before);
  absl::StatusOr<TensorInfo> late = (*writer)->Seal();
  EXPECT_TRUE(StatusIs(late.status(), absl::StatusCode::kNotFound, "reclaimed"));
  EXPECT_EQ(remote_->Stat("slow/producer").status().code(), absl::StatusCode::kNotFound);
}

// A child process that holds `count` leases over a raw handoff connection,
// reports on `ready_fd`, and waits to be killed. It uses no gRPC, so forking
// a process with gRPC threads is safe.
[[noreturn]] void HoldLeasesAndWait(const std::string& socket_path, int count, int ready_fd) {
  absl::StatusOr<ScopedFd> socket = ConnectSeqpacket(socket_path);
  if (!socket.ok()) ::_exit(2);
  std::vector<ScopedFd> fds;
  for (int i = 0; i < count; ++i) {
    v1::HandoffRequest request;
    request.set_request_id(i + 1);
    request.mutable_acquire()->set_name(absl::StrCat("many/", i));
    request.mutable_acquire()->set_accepts_arena_slots(true);
    if (!SendPacket(socket->get(), request.SerializeAsString()).ok()) ::_exit(3);
    absl::StatusOr<ReceivedPacket> packet = ReceivePacket(socket->get());
    v1::HandoffResponse response;
    if (!packet.ok() || !response.ParseFromString(packet->bytes) || response.code() != 0 ||
        !packet->fd.valid()) {
      ::_exit(4);
    }
    fds.push_back(std::move(packet->fd));
  }
  char ok = 'k';
  if (::write(ready_fd, &ok, 1) != 1) ::_exit(5);
  while (true) ::pause();
}

TEST_F(LocalHandoffTest, KilledClientReleasesAThousandLeasesWithinASecond) {
  constexpr int kLeases = 1000;
  for (int i = 0; i < kLeases; ++i) PutBytes(absl::StrCat("many/", i), 64, i);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    HoldLeasesAndWait(socket_path_, kLeases, pipe_fds[1]);
  }
  ::close(pipe_fds[1]);
  char ready = 0;
  ASSERT_EQ(::read(pipe_fds[0], &ready, 1), 1) << "lease-holding child failed";
  ::close(pipe_fds[0]);
  absl::StatusOr<std::vector<TensorInfo>> held = remote_->ListAll("many/");
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->size(), static_cast<size_t>(kLeases));
  for (const TensorInfo& info : *held) ASSERT_EQ(info.open_leases, 1u) << info.name;

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const absl::Time killed = absl::Now();
  // Each probe lists all 1,000 names in one call. The bound is on when the
  // probe that first sees none held was sent, not when its answer came
  // back: under TSan on a loaded machine one call can take a large part of
  // a second, and that is the probe's time, not the server's.
  absl::Time released_by = absl::InfiniteFuture();
  std::vector<TensorInfo> last_seen;
  while (absl::Now() - killed < absl::Seconds(10)) {
    const absl::Time sent = absl::Now();
    absl::StatusOr<std::vector<TensorInfo>> listed = remote_->ListAll("many/");
    ASSERT_TRUE(listed.ok()) << listed.status();
    ASSERT_EQ(listed->size(), static_cast<size_t>(kLeases));
    last_seen = *std::move(listed);
    if (std::all_of(last_seen.begin(), last_seen.end(),
                    [](const TensorInfo& info) { return info.open_leases == 0; })) {
      released_by = sent;
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  for (const TensorInfo& info : last_seen) EXPECT_EQ(info.open_leases, 0u) << info.name;
  EXPECT_LT(released_by - killed, absl::Seconds(1));
}

TEST_F(LocalHandoffTest, PeerNotOnTheAllowListIsRefusedUntilItPresentsAToken) {
  // Allow only a uid that is not ours.
  StartServer({absl::StrCat("--handoff-allow-uid=", ::getuid() + 4242)});
  PutBytes("guarded", 256, 5);
  absl::StatusOr<ScopedFd> socket = ConnectSeqpacket(socket_path_);
  ASSERT_TRUE(socket.ok());
  v1::HandoffRequest request;
  request.set_request_id(1);
  request.mutable_acquire()->set_name("guarded");
  ASSERT_TRUE(SendPacket(socket->get(), request.SerializeAsString()).ok());
  absl::StatusOr<ReceivedPacket> packet = ReceivePacket(socket->get());
  ASSERT_TRUE(packet.ok());
  v1::HandoffResponse response;
  ASSERT_TRUE(response.ParseFromString(packet->bytes));
  EXPECT_EQ(response.code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_TRUE(absl::StrContains(response.message(), absl::StrCat("uid ", ::getuid())))
      << response.message();
  EXPECT_FALSE(packet->fd.valid());
  // A made-up token is refused too.
  request.clear_acquire();
  request.mutable_authenticate()->set_token("00ff");
  ASSERT_TRUE(SendPacket(socket->get(), request.SerializeAsString()).ok());
  packet = ReceivePacket(socket->get());
  ASSERT_TRUE(packet.ok() && response.ParseFromString(packet->bytes));
  EXPECT_EQ(response.code(), static_cast<int>(absl::StatusCode::kPermissionDenied));

  // The client library fetches a single-use token over gRPC and gets in.
  absl::StatusOr<Tensor> fetched = local_->Fetch("guarded");
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(absl::StrContains(MapsLineOf(fetched->dl_tensor().data), "memfd:tensord:arena-"));
}

TEST_F(LocalHandoffTest, NoFdLeaksOnEitherSide) {
  PutBytes("fd/check", 4096, 6);
  // Warm up both sides (channel, handoff connection).
  ASSERT_TRUE(local_->Fetch("fd/check").ok());
  const std::string server_fds = absl::StrCat("/proc/", server_->pid(), "/fd");
  const size_t client_before = CountOpenFds("/proc/self/fd");
  const size_t server_before = CountOpenFds(server_fds);
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<Tensor> tensor = local_->Fetch("fd/check");
    ASSERT_TRUE(tensor.ok());
    if (i % 50 == 0) PutBytes("fd/check", 4096, 100 + i);  // new versions, new memfds
  }
  PutBytes("fd/check", 4096, 999);  // retire the last held version server-side
  // Tensor memory is exact: the server keeps one memfd per live version (only
  // the latest is left) and this client holds none once its tensors are gone.
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  while (absl::Now() < deadline && CountMemfds(server_fds) != 1) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(CountMemfds(server_fds), 1u);
  EXPECT_EQ(CountMemfds("/proc/self/fd"), 0u);
  // gRPC's threads open and close fds of their own in the background (slowly
  // under TSan), so the totals may move by a few either way; a leak per fetch
  // or per version would add hundreds.
  EXPECT_LE(CountOpenFds("/proc/self/fd"), client_before + 2);
  EXPECT_LE(CountOpenFds(server_fds), server_before + 2);
}

TEST_F(LocalHandoffTest, AutoPathFallsBackToGrpcWhenHandoffIsOff) {
  ServerProcessOptions options;  // the harness turns local handoff off
  absl::StatusOr<std::unique_ptr<ServerProcess>> plain = ServerProcess::Start(options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  std::unique_ptr<Client> client = ConnectClient((*plain)->address());
  HostTensor tensor = CompactTensor(kU8, {16}, PatternBytes(16, 7));
  DLTensor dl = tensor.dl();
  ASSERT_TRUE(client->Put("plain", dl).ok());
  EXPECT_FALSE(client->local());
  absl::StatusOr<Tensor> fetched = client->Fetch("plain");
  ASSERT_TRUE(fetched.ok());
  EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), tensor.storage));
  ClientOptions forced;
  forced.path = TransferPath::kLocal;
  std::unique_ptr<Client> local_only = ConnectClient((*plain)->address(), forced);
  EXPECT_EQ(local_only->Fetch("plain").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tensord::testing
