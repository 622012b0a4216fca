// Local GPU handoff through a real tensord with the simulated device backend
// (--device-backend=simulated): device tensors fetched as imports of the
// server's device memory (kDLCUDA), the per-process import cache, leases
// ending with the tensor or the process, device create/seal, and the
// host-copy escape hatch (FetchOptions::device_to_host). The simulated
// backend's device memory is host memory in a memfd, so the tests read the
// bytes through the imported pointer. One test runs on a real GPU and skips
// without one.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/device_import_cache.h"
#include "gtest/gtest.h"
#include "service/common/unix_socket.h"
#include "tensord/client.h"
#include "tensord/v1/handoff.pb.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/handoff_server_test.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

PutOptions OnDevice(int device) {
  PutOptions options;
  options.device = DLDevice{kDLCUDA, device};
  return options;
}

CreateOptions CreateOnDevice(int device) {
  CreateOptions options;
  options.device = DLDevice{kDLCUDA, device};
  return options;
}

// A child process that sends one raw handoff request, checks that the answer
// is OK and came with an fd (a device handle's), reports on `ready_fd` and
// waits to be killed. It uses no gRPC, so forking a process with gRPC
// threads is safe.
[[noreturn]] void SendAndWaitToBeKilled(const std::string& socket_path,
                                        const v1::HandoffRequest& request, int ready_fd) {
  absl::StatusOr<ScopedFd> socket = ConnectSeqpacket(socket_path);
  if (!socket.ok()) ::_exit(2);
  if (!SendPacket(socket->get(), request.SerializeAsString()).ok()) ::_exit(3);
  absl::StatusOr<ReceivedPacket> packet = ReceivePacket(socket->get());
  v1::HandoffResponse response;
  if (!packet.ok() || !response.ParseFromString(packet->bytes) || response.code() != 0 ||
      !packet->fd.valid()) {
    ::_exit(4);
  }
  const bool has_handle = response.has_acquire() ? response.acquire().has_device_handle()
                                                 : response.create().has_device_handle();
  if (!has_handle) ::_exit(5);
  char ok = 'k';
  if (::write(ready_fd, &ok, 1) != 1) ::_exit(6);
  while (true) ::pause();
}

// Parameter: whether the simulated devices offer legacy IPC handles only
// (drivers without VMM fd support); otherwise allocations are VMM (POSIX
// fd), which the registry prefers.
class DeviceHandoffTest : public HandoffServerTest<::testing::TestWithParam<bool>> {
 protected:
  void SetUp() override { StartServer({}); }

  void StartServer(std::vector<std::string> extra_flags) {
    std::vector<std::string> flags = {"--device-backend=simulated", "--simulated-devices=2",
                                      "--max-device-bytes=8MiB"};
    if (GetParam()) flags.push_back("--simulated-legacy-ipc-only");
    for (std::string& flag : extra_flags) flags.push_back(std::move(flag));
    StartServerWith(std::move(flags));
  }

  // Puts `size` pattern bytes on cuda:`device` over gRPC.
  std::vector<uint8_t> PutOnDevice(const std::string& name, size_t size, uint64_t seed,
                                   int device) {
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, seed));
    absl::StatusOr<TensorInfo> put = remote_->Put(name, tensor.dl(), OnDevice(device));
    EXPECT_TRUE(put.ok()) << put.status();
    return tensor.storage;
  }

  // Bytes the server holds on cuda:`device` (GetServerInfo).
  uint64_t DeviceBytesUsed(int device) {
    std::unique_ptr<RawStub> stub = NewRawStub(server_->address());
    v1::GetServerInfoResponse info;
    grpc::Status status =
        stub->GetServerInfo(RawContext().get(), v1::GetServerInfoRequest(), &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok() || device >= info.devices_size()) return ~uint64_t{0};
    return info.devices(device).bytes_used();
  }

  bool WaitForDeviceBytes(int device, uint64_t expected, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (DeviceBytesUsed(device) == expected) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return DeviceBytesUsed(device) == expected;
  }

  // Forks a child that sends `request` on the handoff socket and holds what
  // it got until killed. Returns its pid once it reported, -1 on failure.
  pid_t StartHoldingChild(const v1::HandoffRequest& request) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return -1;
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(pipe_fds[0]);
      SendAndWaitToBeKilled(socket_path_, request, pipe_fds[1]);
    }
    ::close(pipe_fds[1]);
    char ready = 0;
    const bool reported = child > 0 && ::read(pipe_fds[0], &ready, 1) == 1;
    ::close(pipe_fds[0]);
    if (child > 0 && !reported) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      return -1;
    }
    return child;
  }

  static void KillAndReap(pid_t child) {
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
  }
};

TEST_P(DeviceHandoffTest, LocalFetchIsAnImportOfTheServersDeviceMemory) {
  const std::string name = TestTensorName("weights");
  const std::vector<uint8_t> bytes = PutOnDevice(name, 300'001, 1, /*device=*/1);
  std::unique_ptr<Client> automatic = Connect(TransferPath::kAuto);
  ASSERT_NE(automatic, nullptr);
  for (Client* client : {local_.get(), automatic.get()}) {
    absl::StatusOr<Tensor> fetched = client->Fetch(name);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    const DLTensor& dl = fetched->dl_tensor();
    EXPECT_EQ(dl.device.device_type, kDLCUDA);
    EXPECT_EQ(dl.device.device_id, 1);
    EXPECT_EQ(fetched->info().device.device_type, kDLCUDA);
    // Simulated device memory is host memory: the bytes are readable here.
    EXPECT_TRUE(BytesEqual(dl.data, fetched->data_bytes(), bytes));
    // Not a copy: the very memfd the server's simulated device 1 allocated.
    const std::string line = MapsLineOf(dl.data);
    EXPECT_TRUE(absl::StrContains(line, "memfd:tensord-sim-dev1-")) << line;
    // The stored version itself: mapped so that a consumer's write faults.
    EXPECT_TRUE(absl::StrContains(line, " r--s ")) << line;
    DLManagedTensorVersioned* versioned = fetched->release_versioned();
    EXPECT_NE(versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
    EXPECT_EQ(versioned->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
    EXPECT_EQ(versioned->dl_tensor.device.device_type, kDLCUDA);
    versioned->deleter(versioned);
  }
}

TEST_P(DeviceHandoffTest, RepeatedFetchesReuseOneImport) {
  const std::string name = TestTensorName("cached");
  const std::vector<uint8_t> bytes = PutOnDevice(name, 64 * 1024, 2, 0);
  DeviceImportCache& cache = DeviceImportCache::Process();
  const uint64_t opened_before = cache.imports_opened();
  const size_t open_before = cache.open_imports();

  absl::StatusOr<Tensor> first = local_->Fetch(name);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(cache.imports_opened(), opened_before + 1);
  EXPECT_EQ(cache.open_imports(), open_before + 1);
  FetchOptions at_version;
  at_version.version = first->info().version;
  absl::StatusOr<Tensor> second = local_->Fetch(name);
  absl::StatusOr<Tensor> third = local_->Fetch(name, at_version);
  ASSERT_TRUE(second.ok() && third.ok());
  EXPECT_EQ(cache.imports_opened(), opened_before + 1);  // not opened again
  EXPECT_EQ(second->dl_tensor().data, first->dl_tensor().data);
  EXPECT_EQ(third->dl_tensor().data, first->dl_tensor().data);
  EXPECT_EQ(OpenLeases(name), 1u);  // one lease for this connection

  *first = Tensor();
  *second = Tensor();
  *third = Tensor();
  EXPECT_EQ(cache.open_imports(), open_before);  // closed with the last tensor
  EXPECT_TRUE(WaitForLeases(name, 0, absl::Seconds(2)));
  // A new fetch opens it afresh.
  absl::StatusOr<Tensor> again = local_->Fetch(name);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(cache.imports_opened(), opened_before + 2);
  EXPECT_TRUE(BytesEqual(again->dl_tensor().data, again->data_bytes(), bytes));
}

TEST_P(DeviceHandoffTest, TwoClientsInOneProcessShareTheImport) {
  const std::string name = TestTensorName("shared");
  const std::vector<uint8_t> bytes = PutOnDevice(name, 1 << 20, 3, 1);
  std::unique_ptr<Client> other = Connect(TransferPath::kLocal);
  ASSERT_NE(other, nullptr);
  DeviceImportCache& cache = DeviceImportCache::Process();
  const uint64_t opened_before = cache.imports_opened();

  // A legacy IPC handle opens once per process: without the shared cache
  // the second client's import would be refused.
  absl::StatusOr<Tensor> mine = local_->Fetch(name);
  ASSERT_TRUE(mine.ok()) << mine.status();
  absl::StatusOr<Tensor> theirs = other->Fetch(name);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(cache.imports_opened(), opened_before + 1);
  EXPECT_EQ(mine->dl_tensor().data, theirs->dl_tensor().data);
  EXPECT_EQ(OpenLeases(name), 2u);  // each connection holds its own lease

  // One client's tensor going leaves the other's import usable.
  *mine = Tensor();
  EXPECT_TRUE(WaitForLeases(name, 1, absl::Seconds(2)));
  EXPECT_TRUE(BytesEqual(theirs->dl_tensor().data, theirs->data_bytes(), bytes));
  *theirs = Tensor();
  EXPECT_TRUE(WaitForLeases(name, 0, absl::Seconds(2)));
}

TEST_P(DeviceHandoffTest, ConcurrentFetchesFromTwoClientsShareOneImport) {
  const std::string name = TestTensorName("concurrent");
  const std::vector<uint8_t> bytes = PutOnDevice(name, 256 * 1024, 12, 0);
  std::unique_ptr<Client> other = Connect(TransferPath::kLocal);
  ASSERT_NE(other, nullptr);
  DeviceImportCache& cache = DeviceImportCache::Process();
  const uint64_t opened_before = cache.imports_opened();
  // Keeps the import open, so every fetch below must find it in the cache.
  absl::StatusOr<Tensor> pinned = local_->Fetch(name);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Client& client = t % 2 == 0 ? *local_ : *other;
      for (int i = 0; i < 25; ++i) {
        absl::StatusOr<Tensor> fetched = client.Fetch(name);
        if (!fetched.ok() || fetched->dl_tensor().data != pinned->dl_tensor().data ||
            std::memcmp(fetched->dl_tensor().data, bytes.data(), 64) != 0) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cache.imports_opened(), opened_before + 1);
  *pinned = Tensor();
  EXPECT_TRUE(WaitForLeases(name, 0, absl::Seconds(2)));
}

TEST_P(DeviceHandoffTest, ServerKeepsNoFdPerDeviceLease) {
  // Twelve tensors, each its own allocation and lease: the exported fds go
  // once sent (the keepalives hold the memory), so the server's open fds do
  // not grow with the leases.
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) {
    names.push_back(TestTensorName(absl::StrCat("fds", i)));
    HostTensor tensor = CompactTensor(kU8, {4096}, PatternBytes(4096, 40 + i));
    absl::StatusOr<TensorInfo> put = remote_->Put(names.back(), tensor.dl(), OnDevice(0));
    ASSERT_TRUE(put.ok()) << put.status();
  }
  const std::string server_fds = absl::StrCat("/proc/", server_->pid(), "/fd");
  const size_t before = CountOpenFds(server_fds);
  std::vector<Tensor> held;
  for (const std::string& name : names) {
    absl::StatusOr<Tensor> fetched = local_->Fetch(name);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    held.push_back(*std::move(fetched));
  }
  for (const std::string& name : names) EXPECT_EQ(OpenLeases(name), 1u);
  // The new handoff connection, the last export until the next request,
  // one fd of slack; without closing exports it was 12 more.
  EXPECT_LE(CountOpenFds(server_fds), before + 3) << "an fd per device lease";
}

TEST_P(DeviceHandoffTest, LeaseEndsWhenTheTensorIsDeleted) {
  const std::string name = TestTensorName("lease");
  PutOnDevice(name, 4096, 4, 0);
  absl::StatusOr<Tensor> fetched = local_->Fetch(name);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(OpenLeases(name), 1u);
  DLManagedTensor* handed = fetched->release();
  EXPECT_EQ(OpenLeases(name), 1u);
  handed->deleter(handed);
  EXPECT_TRUE(WaitForLeases(name, 0, absl::Seconds(2)));
}

TEST_P(DeviceHandoffTest, KilledChildReleasesItsDeviceLease) {
  const std::string name = TestTensorName("killed");
  PutOnDevice(name, 128 * 1024, 5, 1);
  v1::HandoffRequest request;
  request.set_request_id(1);
  request.mutable_acquire()->set_name(name);
  const pid_t child = StartHoldingChild(request);
  ASSERT_GT(child, 0) << "the lease-holding child failed";
  EXPECT_EQ(OpenLeases(name), 1u);
  KillAndReap(child);
  EXPECT_TRUE(WaitForLeases(name, 0, absl::Seconds(2)));
}

TEST_P(DeviceHandoffTest, DeleteWhileLeasedKeepsTheDeviceMemoryUntilRelease) {
  const std::string name = TestTensorName("deleted");
  const std::vector<uint8_t> bytes = PutOnDevice(name, 4 << 20, 6, 0);
  absl::StatusOr<Tensor> fetched = local_->Fetch(name);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  const uint64_t version = fetched->info().version;
  ASSERT_TRUE(remote_->Delete(name).ok());
  EXPECT_EQ(remote_->Stat(name).status().code(), absl::StatusCode::kNotFound);
  // The leased version keeps its device bytes (and its charge) alive.
  EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), bytes));
  EXPECT_EQ(DeviceBytesUsed(0), uint64_t{4} << 20);
  EXPECT_EQ(OpenLeases(name, version), 1u);
  *fetched = Tensor();
  EXPECT_TRUE(WaitForDeviceBytes(0, 0, absl::Seconds(2)));
  EXPECT_EQ(remote_->Stat(name, version).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(DeviceHandoffTest, EmptyDeviceTensorNeedsNoImport) {
  const std::string name = TestTensorName("empty");
  PutOnDevice(name, 0, 7, 1);
  const uint64_t opened_before = DeviceImportCache::Process().imports_opened();
  absl::StatusOr<Tensor> fetched = local_->Fetch(name);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->dl_tensor().device.device_type, kDLCUDA);
  EXPECT_NE(fetched->dl_tensor().data, nullptr);
  EXPECT_EQ(fetched->data_bytes(), 0u);
  EXPECT_EQ(DeviceImportCache::Process().imports_opened(), opened_before);
}

TEST_P(DeviceHandoffTest, DeviceToHostGivesAHostCopy) {
  const std::string name = TestTensorName("to_host");
  const std::vector<uint8_t> bytes = PutOnDevice(name, 200'000, 8, 1);
  std::unique_ptr<Client> automatic = Connect(TransferPath::kAuto);
  ASSERT_NE(automatic, nullptr);
  const uint64_t opened_before = DeviceImportCache::Process().imports_opened();
  FetchOptions host;
  host.device_to_host = true;
  host.verify_crc32c = true;
  absl::StatusOr<Tensor> copied = automatic->Fetch(name, host);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->dl_tensor().device.device_type, kDLCPU);
  EXPECT_EQ(copied->info().device.device_type, kDLCUDA);
  EXPECT_TRUE(BytesEqual(copied->dl_tensor().data, copied->data_bytes(), bytes));
  DLManagedTensorVersioned* versioned = copied->release_versioned();
  EXPECT_NE(versioned->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  versioned->deleter(versioned);
  EXPECT_EQ(DeviceImportCache::Process().imports_opened(), opened_before);
  // No local lease was taken; the gRPC fetch's lease ends when gRPC frees
  // its last slice, which may be just after Fetch returned.
  EXPECT_TRUE(WaitForLeases(name, 0, absl::Seconds(2)));

  // kLocal cannot make a host copy of device memory.
  EXPECT_TRUE(StatusIs(local_->Fetch(name, host).status(), absl::StatusCode::kFailedPrecondition,
                       "cuda:1"));
  // FetchInto fills host memory: over gRPC for kAuto, refused for kLocal.
  std::vector<uint8_t> into(bytes.size());
  HostTensor destination = CompactTensor(kU8, {static_cast<int64_t>(bytes.size())}, into);
  ASSERT_TRUE(automatic->FetchInto(name, destination.dl()).ok());
  EXPECT_TRUE(BytesEqual(destination.storage.data(), destination.storage.size(), bytes));
  EXPECT_TRUE(StatusIs(local_->FetchInto(name, destination.dl()).status(),
                       absl::StatusCode::kFailedPrecondition, "host bytes"));
  // Host tensors still take the local path with device_to_host.
  const std::string host_name = TestTensorName("host");
  HostTensor tensor = CompactTensor(kU8, {4096}, PatternBytes(4096, 9));
  ASSERT_TRUE(remote_->Put(host_name, tensor.dl()).ok());
  absl::StatusOr<Tensor> mapped = local_->Fetch(host_name, host);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_TRUE(absl::StrContains(MapsLineOf(mapped->dl_tensor().data), "memfd:tensord:"));
}

TEST_P(DeviceHandoffTest, DeviceCreateSealPublishesWhatWasWritten) {
  const std::string name = TestTensorName("made");
  const std::vector<int64_t> shape = {128, 64};
  const uint64_t size = 128 * 64 * 4;
  absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
      local_->Create(name, kF32, shape, CreateOnDevice(1));
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_EQ((*writer)->size(), size);
  EXPECT_EQ((*writer)->device().device_type, kDLCUDA);
  EXPECT_EQ((*writer)->device().device_id, 1);
  EXPECT_EQ(DeviceBytesUsed(1), size);
  // Simulated device memory is host memory: a CUDA producer would
  // cudaMemcpy and synchronize its stream here.
  auto* values = static_cast<float*>((*writer)->data());
  for (int i = 0; i < 128 * 64; ++i) values[i] = static_cast<float>(i) * 0.5f;
  EXPECT_EQ(remote_->Stat(name).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<TensorInfo> sealed = (*writer)->Seal(/*send_crc32c=*/true);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(sealed->shape, shape);
  EXPECT_EQ(sealed->device.device_type, kDLCUDA);
  EXPECT_EQ(sealed->device.device_id, 1);

  absl::StatusOr<Tensor> remote = remote_->Fetch(name);
  ASSERT_TRUE(remote.ok()) << remote.status();
  absl::StatusOr<Tensor> local = local_->Fetch(name);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->dl_tensor().device.device_type, kDLCUDA);
  for (const Tensor* tensor : {&*remote, &*local}) {
    const auto* read = static_cast<const float*>(tensor->dl_tensor().data);
    for (int i = 0; i < 128 * 64; ++i) ASSERT_EQ(read[i], static_cast<float>(i) * 0.5f) << i;
  }
}

// The items of an atomic group share one version number; each local fetch
// must still import its own allocation.
TEST_P(DeviceHandoffTest, DeviceGroupItemsAreImportedApart) {
  const std::vector<int64_t> shape = {256};
  std::vector<std::unique_ptr<TensorWriter>> writers;
  std::vector<std::string> names;
  for (int item = 0; item < 2; ++item) {
    names.push_back(TestTensorName(absl::StrCat("group", item)));
    absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
        local_->Create(names.back(), kF32, shape, CreateOnDevice(0));
    ASSERT_TRUE(writer.ok()) << writer.status();
    auto* values = static_cast<float*>((*writer)->data());
    for (int i = 0; i < 256; ++i) values[i] = static_cast<float>(item * 1000 + i);
    writers.push_back(*std::move(writer));
  }
  absl::StatusOr<SealGroupResult> sealed = local_->SealGroup(writers);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  ASSERT_EQ(sealed->items[0].version, sealed->items[1].version);
  // Both held at once: the first import is still open when the second is asked for.
  std::vector<Tensor> fetched;
  for (int item = 0; item < 2; ++item) {
    absl::StatusOr<Tensor> tensor = local_->Fetch(names[item]);
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    fetched.push_back(*std::move(tensor));
  }
  for (int item = 0; item < 2; ++item) {
    ASSERT_EQ(fetched[item].dl_tensor().device.device_type, kDLCUDA);
    const auto* read = static_cast<const float*>(fetched[item].dl_tensor().data);
    for (int i = 0; i < 256; ++i)
      ASSERT_EQ(read[i], static_cast<float>(item * 1000 + i)) << item << " " << i;
  }
}

TEST_P(DeviceHandoffTest, DeviceCreateBeyondCapacityIsRefusedByDeviceAndBytes) {
  const std::string name = TestTensorName("too_big");
  const int64_t nine_mib = 9 << 20;
  absl::StatusOr<std::unique_ptr<TensorWriter>> refused =
      local_->Create(name, kU8, std::vector<int64_t>{nine_mib}, CreateOnDevice(0));
  EXPECT_TRUE(StatusIs(refused.status(), absl::StatusCode::kResourceExhausted, "cuda:0"));
  EXPECT_TRUE(MessageMentions(refused.status(), absl::StrCat(nine_mib)));
  EXPECT_EQ(DeviceBytesUsed(0), 0u);
  EXPECT_TRUE(
      StatusIs(local_->Create(name, kU8, std::vector<int64_t>{16}, CreateOnDevice(2)).status(),
               absl::StatusCode::kInvalidArgument, "cuda:2"));
  // The other device has its own budget.
  absl::StatusOr<std::unique_ptr<TensorWriter>> fits =
      local_->Create(name, kU8, std::vector<int64_t>{6 << 20}, CreateOnDevice(1));
  ASSERT_TRUE(fits.ok()) << fits.status();
}

TEST_P(DeviceHandoffTest, AbandonedDeviceCreatePublishesNothingAndFreesItsBytes) {
  const std::string name = TestTensorName("abandoned");
  {
    absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
        local_->Create(name, kU8, std::vector<int64_t>{1 << 20}, CreateOnDevice(0));
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::memset((*writer)->data(), 1, 1 << 20);
    EXPECT_EQ(DeviceBytesUsed(0), uint64_t{1} << 20);
  }  // destroyed unsealed: aborted
  EXPECT_EQ(DeviceBytesUsed(0), 0u);
  EXPECT_EQ(remote_->Stat(name).status().code(), absl::StatusCode::kNotFound);

  // A producer killed mid-create.
  v1::HandoffRequest request;
  request.set_request_id(1);
  v1::CreateRequest* create = request.mutable_create();
  create->set_name(name);
  create->mutable_layout()->mutable_dtype()->set_code(kDLUInt);
  create->mutable_layout()->mutable_dtype()->set_bits(8);
  create->mutable_layout()->mutable_dtype()->set_lanes(1);
  create->mutable_layout()->add_shape(2 << 20);
  create->mutable_layout()->mutable_device()->set_type(kDLCUDA);
  create->mutable_layout()->mutable_device()->set_id(1);
  create->set_total_bytes(2 << 20);
  const pid_t child = StartHoldingChild(request);
  ASSERT_GT(child, 0) << "the creating child failed";
  EXPECT_EQ(DeviceBytesUsed(1), uint64_t{2} << 20);
  KillAndReap(child);
  EXPECT_TRUE(WaitForDeviceBytes(1, 0, absl::Seconds(2)));
  EXPECT_EQ(remote_->Stat(name).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(DeviceHandoffTest, DeviceCreateNeverSealedIsReclaimedAfterTheTimeout) {
  StartServer({"--create-timeout=1s"});
  const std::string name = TestTensorName("slow");
  absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
      local_->Create(name, kU8, std::vector<int64_t>{4096}, CreateOnDevice(1));
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ(DeviceBytesUsed(1), 4096u);
  EXPECT_TRUE(WaitForDeviceBytes(1, 0, absl::Seconds(5)));
  EXPECT_TRUE(StatusIs((*writer)->Seal().status(), absl::StatusCode::kNotFound, "reclaimed"));
  EXPECT_EQ(remote_->Stat(name).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(DeviceHandoffTest, HostPutsOnlyGoToDevicesOverGrpc) {
  const std::string name = TestTensorName("put");
  HostTensor tensor = CompactTensor(kU8, {1000}, PatternBytes(1000, 10));
  EXPECT_TRUE(StatusIs(local_->Put(name, tensor.dl(), OnDevice(0)).status(),
                       absl::StatusCode::kFailedPrecondition, "CreateOptions::device"));
  std::unique_ptr<Client> automatic = Connect(TransferPath::kAuto);
  ASSERT_NE(automatic, nullptr);
  absl::StatusOr<TensorInfo> put = automatic->Put(name, tensor.dl(), OnDevice(1));
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->device.device_id, 1);
}

// The same handoff against a real GPU; skipped without one.
INSTANTIATE_TEST_SUITE_P(HandleKinds, DeviceHandoffTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "legacy_ipc" : "posix_fd";
                         });

TEST(DeviceHandoffCudaTest, LocalFetchAndCreateOnARealGpu) {
  char pattern[] = "/tmp/tensord-cuda-handoff-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string socket_dir = pattern;
  ServerProcessOptions options;
  options.flags = {"--device-backend=cuda", "--handoff-socket=" + socket_dir + "/handoff.sock"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  if (!server.ok()) {
    ::rmdir(socket_dir.c_str());
    GTEST_SKIP() << "no CUDA device here: " << server.status().message().substr(0, 300);
  }
  {
    ClientOptions local_options;
    local_options.path = TransferPath::kLocal;
    std::unique_ptr<Client> local = ConnectClient((*server)->address(), local_options);
    std::unique_ptr<Client> other = ConnectClient((*server)->address(), local_options);
    std::unique_ptr<Client> remote = ConnectClient((*server)->address(), RemoteClientOptions());
    ASSERT_TRUE(local && other && remote);
    const std::string name = TestTensorName("gpu");
    const std::vector<uint8_t> bytes = PatternBytes((1 << 20) + 3, 11);
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(bytes.size())}, bytes);
    ASSERT_TRUE(remote->Put(name, tensor.dl(), OnDevice(0)).ok());
    absl::StatusOr<Tensor> mine = local->Fetch(name);
    if (!mine.ok() && mine.status().code() == absl::StatusCode::kUnavailable) {
      GTEST_SKIP() << "this test binary cannot import CUDA handles: " << mine.status();
    }
    ASSERT_TRUE(mine.ok()) << mine.status();
    EXPECT_EQ(mine->dl_tensor().device.device_type, kDLCUDA);
    absl::StatusOr<Tensor> theirs = other->Fetch(name);  // one cudaIpcOpenMemHandle
    ASSERT_TRUE(theirs.ok()) << theirs.status();
    EXPECT_EQ(mine->dl_tensor().data, theirs->dl_tensor().data);

    absl::StatusOr<std::unique_ptr<TensorWriter>> writer =
        local->Create(TestTensorName("made"), kU8, std::vector<int64_t>{4096}, CreateOnDevice(0));
    ASSERT_TRUE(writer.ok()) << writer.status();
    absl::StatusOr<TensorInfo> sealed = (*writer)->Seal(/*send_crc32c=*/true);
    ASSERT_TRUE(sealed.ok()) << sealed.status();
  }
  server->reset();
  ::unlink((socket_dir + "/handoff.sock").c_str());
  ::rmdir(socket_dir.c_str());
}

}  // namespace
}  // namespace tensord::testing
